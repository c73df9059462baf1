package otel_test

import (
	"context"
	"fmt"

	"github.com/ontopix/sluice"
	sluiceotel "github.com/ontopix/sluice/observe/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Build the adapter on your meter and tracer providers and hand the
// Observer to the Client with sluice.WithObserver. Here the providers keep
// what they record in memory, and one event is fed by hand.
func ExampleNew() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))

	obs, err := sluiceotel.New(mp, tp)
	if err != nil {
		fmt.Println(err)
		return
	}
	// client, err := sluice.New(st, sluice.WithObserver(obs))
	obs.Acquired(context.Background(), sluice.AcquireEvent{
		Dimensions: []sluice.Request{{Dimension: "openai#tpm", Cost: 800}},
		Outcome:    sluice.Granted,
	})

	for _, sp := range spans.Ended() {
		fmt.Println("span:", sp.Name())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "sluice.acquisitions" {
			p := sum.DataPoints[0]
			dim, _ := p.Attributes.Value("sluice.dimension")
			outcome, _ := p.Attributes.Value("sluice.outcome")
			fmt.Println(m.Name, dim.AsString(), outcome.AsString(), p.Value)
		}
	}
	// Output:
	// span: sluice.acquire
	// sluice.acquisitions openai#tpm granted 1
}
