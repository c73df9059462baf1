package history_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// TestTransportThroughSimulator: calls through a real Transport to the
// vendor simulator, whose token limit is tighter than the profile's, are
// recorded by status class as the client saw them; the 429s name the
// token limit, and the lowest remaining is the headers'.
func TestTransportThroughSimulator(t *testing.T) {
	sim, err := vendorsim.New(vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 500, TPM: 2_000}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	ctx := context.Background()
	mem := memstore.New()
	defer mem.Close()
	cfg := sluice.DefaultConfig()
	cfg.Caller = "svc"
	rec, _ := history.New(mem, history.WithTransportCaller("svc"))
	client, err := sluice.New(mem, sluice.WithConfig(cfg), sluice.WithObserver(rec.Observer()))
	if err != nil {
		t.Fatal(err)
	}
	profile, err := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 500, TPM: 30_000})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range profile.Buckets() {
		if err := client.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := transport.New(client, []vendors.Profile{profile},
		transport.WithRoute(transport.Route{Host: strings.TrimPrefix(srv.URL, "http://"), Vendor: vendors.OpenAI}),
		transport.WithEvents(rec.TransportEvent))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: tr}
	statuses := map[int]int64{}
	for i := 0; i < 20 && statuses[429] == 0; i++ { // until the first 429: then the fleet cools down
		body := `{"model":"gpt-4o","max_tokens":400,"messages":[{"role":"user","content":"hello"}]}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk-test")
		req.Header.Set(vendorsim.HeaderOutputTokens, "400")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses[resp.StatusCode]++
	}
	if statuses[200] == 0 || statuses[429] == 0 {
		t.Fatalf("statuses = %v, want some 200s and some 429s", statuses)
	}
	var dims []string
	for _, d := range profile.Dimensions {
		dims = append(dims, d.Name)
	}
	for _, d := range dims {
		now := time.Now()
		ps, err := rec.Query(ctx, history.Query{Dimension: d, Caller: "svc", From: now.Add(-time.Minute), To: now.Add(time.Second), Step: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		minRem := int64(-1)
		for _, p := range ps {
			for k, v := range p.Counts.Responses {
				got[k] += v
			}
			if r := p.Counts.MinRemaining; r >= 0 && (minRem < 0 || r < minRem) {
				minRem = r
			}
		}
		if got["2xx"] != statuses[200] || got["429_tokens"] != statuses[429] || len(got) != 2 {
			t.Errorf("%s: responses %v, want 2xx %d and 429_tokens %d", d, got, statuses[200], statuses[429])
		}
		if minRem < 0 {
			t.Errorf("%s: no remaining recorded", d)
		}
		t.Logf("%s: responses %v, lowest remaining %d", d, got, minRem)
	}
	var cooled bool
	for _, e := range rec.Events(100) {
		cooled = cooled || (e.Kind == history.EventCooldown && strings.HasSuffix(e.Dimension, "#tpm"))
	}
	if !cooled {
		t.Errorf("events = %+v, want the 429's cooldown of the tokens dimension", rec.Events(100))
	}
}
