package prometheus_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ontopix/sluice"
	sluiceprom "github.com/ontopix/sluice/observe/prometheus"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
	prom "github.com/prometheus/client_golang/prometheus"
)

// TestTransportAgainstSim sends calls through a real Transport to the
// vendor simulator on loopback — one answered, one refused for an
// exhausted quota — and checks the vendor series against the events the
// Transport reported.
func TestTransportAgainstSim(t *testing.T) {
	sim, err := vendorsim.New(vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 500, TPM: 30_000}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	ctx := context.Background()
	client, err := sluice.New(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	profile, err := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 500, TPM: 30_000})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range profile.Buckets() {
		if err := client.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	reg := prom.NewRegistry()
	metrics, err := sluiceprom.NewTransportEvents(reg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []transport.Event
	rt, err := transport.New(client, []vendors.Profile{profile},
		transport.WithRoute(transport.Route{Host: strings.TrimPrefix(srv.URL, "http://"), Vendor: vendors.OpenAI}),
		transport.WithEvents(func(ctx context.Context, e transport.Event) {
			metrics(ctx, e)
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: rt}
	call := func() int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk-test")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	if got := call(); got != http.StatusOK {
		t.Fatalf("first call: status %d, want 200", got)
	}
	sim.SetQuotaExhausted(true)
	if got := call(); got != http.StatusTooManyRequests {
		t.Fatalf("call with the quota exhausted: status %d, want 429", got)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || events[0].Reaction == nil || len(events[0].Reaction.Drift) == 0 {
		t.Fatalf("events = %+v, want two, the first with a drift", events)
	}
	var d vendors.Drift // the latest drift of the first dimension synced
	for _, e := range events {
		if e.Reaction != nil {
			for _, x := range e.Reaction.Drift {
				if x.Dimension == events[0].Reaction.Drift[0].Dimension {
					d = x
				}
			}
		}
	}
	got := series(scrape(t, reg))
	tests := []struct{ series, want string }{
		{`sluice_vendor_calls_total{model="gpt-4o",outcome="settled",status="2xx",vendor="openai"}`, "1"},
		{`sluice_vendor_calls_total{model="gpt-4o",outcome="rejected",status="4xx",vendor="openai"}`, "1"},
		{`sluice_vendor_rate_limits_total{kind="quota_exhausted",limit="other",model="gpt-4o",vendor="openai"}`, "1"},
		{`sluice_vendor_wait_seconds_count{model="gpt-4o",vendor="openai"}`, "2"},
		{`sluice_vendor_remaining_tokens{dimension="` + d.Dimension + `"}`, strconv.FormatInt(d.Reported, 10)},
		{`sluice_vendor_drift_tokens{dimension="` + d.Dimension + `"}`, strconv.FormatInt(d.Tokens(), 10)},
	}
	for _, tt := range tests {
		if g := got[tt.series]; g != tt.want {
			t.Errorf("%s = %q, want %q", tt.series, g, tt.want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%v", sortedKeys(got))
	}
}
