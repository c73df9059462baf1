package prometheus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	sluiceprom "github.com/ontopix/sluice/observe/prometheus"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	prom "github.com/prometheus/client_golang/prometheus"
)

func newTransportEvents(t *testing.T, opts ...sluiceprom.Option) (transport.EventFunc, *prom.Registry) {
	t.Helper()
	reg := prom.NewRegistry()
	f, err := sluiceprom.NewTransportEvents(reg, opts...)
	if err != nil {
		t.Fatalf("NewTransportEvents: %v", err)
	}
	return f, reg
}

// rateLimited returns a 429 event whose body named metric.
func rateLimited(model string, kind vendors.Kind, metric vendors.Metric) transport.Event {
	return transport.Event{
		Vendor: vendors.OpenAI, Model: model, Status: 429, Outcome: transport.Rejected, Waited: 250 * time.Millisecond,
		VendorErr: &vendors.Error{Vendor: vendors.OpenAI, Kind: kind, Status: 429},
		Reaction:  &vendors.Reaction{Classification: vendors.Classification{Vendor: vendors.OpenAI, Status: 429, Kind: kind, Metric: metric}},
	}
}

// feedTransport sends one event of each kind a Transport reports.
func feedTransport(ctx context.Context, f transport.EventFunc) {
	f(ctx, transport.Event{Vendor: vendors.OpenAI, Model: "gpt-4o", Status: 200, Outcome: transport.Settled, Waited: 2 * time.Second,
		Latency: 500 * time.Millisecond, Duration: 4 * time.Second,
		Reaction: &vendors.Reaction{Drift: []vendors.Drift{{Dimension: "openai#tpm", Believed: 9000, Reported: 7000}}}})
	f(ctx, transport.Event{Vendor: vendors.OpenAI, Model: "gpt-4o", Status: 200, Outcome: transport.Settled, Waited: 0,
		Reaction: &vendors.Reaction{Drift: []vendors.Drift{{Dimension: "openai#tpm", Believed: 5000, Reported: 5500}}}})
	f(ctx, rateLimited("gpt-4o", vendors.RateLimited, vendors.Tokens))
	f(ctx, rateLimited("gpt-4o", vendors.RateLimited, vendors.OutputTokens))
	f(ctx, rateLimited("gpt-4o", vendors.RateLimited, vendors.Requests))
	f(ctx, rateLimited("gpt-4o", vendors.QuotaExhausted, ""))
	f(ctx, transport.Event{Vendor: vendors.Anthropic, Model: "claude", Status: 529, Outcome: transport.Failed,
		VendorErr: &vendors.Error{Vendor: vendors.Anthropic, Kind: vendors.Overloaded, Status: 529}})
	f(ctx, transport.Event{Vendor: vendors.Anthropic, Model: "claude", Outcome: transport.Denied, Waited: 30 * time.Second, Err: sluice.ErrSlotTimeout})
	f(ctx, transport.Event{Vendor: vendors.Anthropic, Model: "claude", Status: 200, Outcome: transport.Passed, PassReason: "model has no profile"})
	f(ctx, transport.Event{Vendor: vendors.Anthropic, Model: "claude", Outcome: transport.Refunded, Err: errors.New("dial: refused")})
}

func TestTransportEvents(t *testing.T) {
	f, reg := newTransportEvents(t)
	feedTransport(context.Background(), f)
	got := series(scrape(t, reg))
	tests := []struct{ series, want string }{
		{`sluice_vendor_calls_total{model="gpt-4o",outcome="settled",status="2xx",vendor="openai"}`, "2"},
		{`sluice_vendor_calls_total{model="gpt-4o",outcome="rejected",status="4xx",vendor="openai"}`, "4"},
		{`sluice_vendor_calls_total{model="claude",outcome="failed",status="5xx",vendor="anthropic"}`, "1"},
		{`sluice_vendor_calls_total{model="claude",outcome="denied",status="none",vendor="anthropic"}`, "1"},
		{`sluice_vendor_calls_total{model="claude",outcome="passed",status="2xx",vendor="anthropic"}`, "1"},
		{`sluice_vendor_calls_total{model="claude",outcome="refunded",status="none",vendor="anthropic"}`, "1"},
		{`sluice_vendor_rate_limits_total{kind="rate_limited",limit="tokens",model="gpt-4o",vendor="openai"}`, "2"},
		{`sluice_vendor_rate_limits_total{kind="rate_limited",limit="requests",model="gpt-4o",vendor="openai"}`, "1"},
		{`sluice_vendor_rate_limits_total{kind="quota_exhausted",limit="other",model="gpt-4o",vendor="openai"}`, "1"},
		{`sluice_vendor_rate_limits_total{kind="overloaded",limit="other",model="claude",vendor="anthropic"}`, ""}, // a 529 is no 429
		{`sluice_vendor_wait_seconds_count{model="gpt-4o",vendor="openai"}`, "6"},
		{`sluice_vendor_latency_seconds_count{model="gpt-4o",vendor="openai"}`, "6"}, // every response
		{`sluice_vendor_latency_seconds_sum{model="gpt-4o",vendor="openai"}`, "0.5"},
		{`sluice_vendor_call_seconds_sum{model="gpt-4o",vendor="openai"}`, "4"},
		{`sluice_vendor_latency_seconds_count{model="claude",vendor="anthropic"}`, "2"}, // the 529 and the pass-through: not the calls without a response
		{`sluice_vendor_wait_seconds_sum{model="gpt-4o",vendor="openai"}`, "3"},
		{`sluice_vendor_wait_seconds_count{model="claude",vendor="anthropic"}`, "3"}, // the pass-through waited for nothing
		{`sluice_vendor_wait_seconds_sum{model="claude",vendor="anthropic"}`, "30"},
		{`sluice_vendor_remaining_tokens{dimension="openai#tpm"}`, "5500"}, // the latest
		{`sluice_vendor_drift_tokens{dimension="openai#tpm"}`, "-500"},
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

// TestTransportMaxModels checks that models beyond the cap, counted per
// (vendor, model) pair, are labelled "_other".
func TestTransportMaxModels(t *testing.T) {
	f, reg := newTransportEvents(t, sluiceprom.WithMaxModels(2))
	ctx := context.Background()
	for _, e := range []struct {
		vendor vendors.Vendor
		model  string
	}{{vendors.OpenAI, "a"}, {vendors.Anthropic, "a"}, {vendors.OpenAI, "b"}, {vendors.OpenAI, "c"}, {vendors.OpenAI, "a"}} {
		f(ctx, transport.Event{Vendor: e.vendor, Model: e.model, Status: 200, Outcome: transport.Settled})
	}
	got := series(scrape(t, reg))
	for _, tt := range []struct{ series, want string }{
		{`sluice_vendor_calls_total{model="a",outcome="settled",status="2xx",vendor="openai"}`, "2"},
		{`sluice_vendor_calls_total{model="a",outcome="settled",status="2xx",vendor="anthropic"}`, "1"},
		{`sluice_vendor_calls_total{model="_other",outcome="settled",status="2xx",vendor="openai"}`, "2"},
		{`sluice_vendor_calls_total{model="b",outcome="settled",status="2xx",vendor="openai"}`, ""},
	} {
		if g := got[tt.series]; g != tt.want {
			t.Errorf("%s = %q, want %q", tt.series, g, tt.want)
		}
	}
}

func TestNewTransportEventsErrors(t *testing.T) {
	if _, err := sluiceprom.NewTransportEvents(nil); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("nil registerer: %v, want ErrInvalid", err)
	}
	if _, err := sluiceprom.NewTransportEvents(prom.NewRegistry(), sluiceprom.WithMaxModels(0)); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("WithMaxModels(0): %v, want ErrInvalid", err)
	}
	reg := prom.NewRegistry()
	if _, err := sluiceprom.NewTransportEvents(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := sluiceprom.NewTransportEvents(reg); err == nil {
		t.Error("a second NewTransportEvents on one registry succeeded")
	}
	// New's metrics and the vendor metrics share a registry.
	if _, err := sluiceprom.New(reg); err != nil {
		t.Errorf("New beside NewTransportEvents: %v", err)
	}
}

// TestConstLabelsEverywhere checks that WithConstLabels reaches the state
// gauges and the vendor series too.
func TestConstLabelsEverywhere(t *testing.T) {
	opt := sluiceprom.WithConstLabels(prom.Labels{"service": "summarizer"})
	f, reg := newTransportEvents(t, opt)
	f(context.Background(), transport.Event{Vendor: vendors.OpenAI, Model: "m", Status: 200, Outcome: transport.Settled})
	col, err := sluiceprom.NewStateCollector(stateClient(t, nil), opt)
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(col)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			n++
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == "service" && l.GetValue() == "summarizer")
			}
			if !found {
				t.Errorf("%s %v: no service label", mf.GetName(), m.GetLabel())
			}
		}
	}
	if n < 10 {
		t.Errorf("%d series gathered, want the state and vendor series", n)
	}
}

// A model name that is not UTF-8 (an Azure deployment from a request's
// URL may hold any bytes) is recorded with its bad bytes replaced, where
// Prometheus would panic on the raw label value.
func TestTransportEventsInvalidUTF8(t *testing.T) {
	f, reg := newTransportEvents(t)
	f(context.Background(), transport.Event{Vendor: vendors.Azure, Model: "gpt\xff", Status: 200, Outcome: transport.Settled,
		Reaction: &vendors.Reaction{Drift: []vendors.Drift{{Dimension: "azure#\xfe#tpm", Believed: 10, Reported: 5}}}})
	got := series(scrape(t, reg))
	for _, want := range []string{
		"sluice_vendor_calls_total{model=\"gpt\ufffd\",outcome=\"settled\",status=\"2xx\",vendor=\"azure\"}",
		"sluice_vendor_drift_tokens{dimension=\"azure#\ufffd#tpm\"}",
	} {
		if got[want] == "" {
			t.Errorf("no series %s in\n%v", want, sortedKeys(got))
		}
	}
}
