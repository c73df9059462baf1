package prometheus_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/ontopix/sluice"
	sluiceprom "github.com/ontopix/sluice/observe/prometheus"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Register the metrics on a registry, hand the Observer to the Client with
// sluice.WithObserver, and serve the registry with promhttp. Here one
// event is fed by hand and /metrics is read back.
func ExampleNew() {
	reg := prom.NewRegistry()
	obs, err := sluiceprom.New(reg, sluiceprom.WithConstLabels(prom.Labels{"service": "summarizer"}))
	if err != nil {
		fmt.Println(err)
		return
	}
	// client, err := sluice.New(st, sluice.WithObserver(obs))
	obs.Acquired(context.Background(), sluice.AcquireEvent{
		Dimensions: []sluice.Request{{Dimension: "openai#rpm", Cost: 1}, {Dimension: "openai#tpm", Cost: 800}},
		Outcome:    sluice.Granted,
	})

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "sluice_acquire_total") && strings.Contains(line, "granted") {
			fmt.Println(line)
		}
	}
	// Output:
	// sluice_acquire_total{dimension="openai#rpm",outcome="granted",service="summarizer"} 1
	// sluice_acquire_total{dimension="openai#tpm",outcome="granted",service="summarizer"} 1
}

// Export the buckets' state: the collector reads them through the Client
// when scraped, at most once per WithStateCacheFor period.
func ExampleNewStateCollector() {
	ctx := context.Background()
	client, err := sluice.New(memstore.New())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "openai#tpm", Config: sluice.PerMinute(sluice.Tokens, 30_000)})
	_, _ = client.Acquire(ctx, "openai#tpm", sluice.WithCost(7_500))

	state, err := sluiceprom.NewStateCollector(client, sluiceprom.WithStateCacheFor(5*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := prom.NewRegistry()
	reg.MustRegister(state)

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "sluice_bucket_capacity_tokens" || mf.GetName() == "sluice_state_up" {
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output:
	// sluice_bucket_capacity_tokens 30000
	// sluice_state_up 1
}

// Count a vendor transport's calls: pass the EventFunc to transport.New
// with transport.WithEvents. Here one event is fed by hand.
func ExampleNewTransportEvents() {
	reg := prom.NewRegistry()
	events, err := sluiceprom.NewTransportEvents(reg, sluiceprom.WithMaxModels(20))
	if err != nil {
		fmt.Println(err)
		return
	}
	// rt, err := transport.New(client, profiles, transport.WithEvents(events))
	events(context.Background(), transport.Event{
		Vendor: vendors.OpenAI, Model: "gpt-4o", Status: 429, Outcome: transport.Rejected,
		VendorErr: &vendors.Error{Vendor: vendors.OpenAI, Kind: vendors.RateLimited, Status: 429},
		Reaction:  &vendors.Reaction{Classification: vendors.Classification{Kind: vendors.RateLimited, Metric: vendors.Tokens}},
	})
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "sluice_vendor_rate_limits_total" {
			for _, l := range mf.GetMetric()[0].GetLabel() {
				fmt.Printf("%s=%s ", l.GetName(), l.GetValue())
			}
			fmt.Println(mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output:
	// kind=rate_limited limit=tokens model=gpt-4o vendor=openai 1
}
