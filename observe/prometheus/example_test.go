package prometheus_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/ontopix/sluice"
	sluiceprom "github.com/ontopix/sluice/observe/prometheus"
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
