package otel_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	sluiceotel "github.com/ontopix/sluice/observe/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// benchObserver builds the adapter on the SDK's meter, and on the SDK's
// tracer sampling every span (traced) or on a no-op tracer.
func benchObserver(b *testing.B, traced bool) *sluice.Observer {
	b.Helper()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	var obs *sluice.Observer
	var err error
	if traced {
		obs, err = sluiceotel.New(mp, sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample())))
	} else {
		obs, err = sluiceotel.New(mp, tracenoop.NewTracerProvider())
	}
	if err != nil {
		b.Fatal(err)
	}
	return obs
}

var acquired = sluice.AcquireEvent{Dimensions: both, Outcome: sluice.Granted, Duration: time.Millisecond}

// BenchmarkOTelAcquired measures one granted acquisition of two dimensions,
// metrics only.
func BenchmarkOTelAcquired(b *testing.B) {
	obs, ctx := benchObserver(b, false), context.Background()
	b.ReportAllocs()
	for b.Loop() {
		obs.Acquired(ctx, acquired)
	}
}

// BenchmarkOTelAcquiredTraced measures the same with every span sampled.
func BenchmarkOTelAcquiredTraced(b *testing.B) {
	obs, ctx := benchObserver(b, true), context.Background()
	b.ReportAllocs()
	for b.Loop() {
		obs.Acquired(ctx, acquired)
	}
}

// BenchmarkOTelAcquiredNoop measures the adapter on no-op providers: the
// cost of the hooks themselves.
func BenchmarkOTelAcquiredNoop(b *testing.B) {
	obs, err := sluiceotel.New(metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		obs.Acquired(ctx, acquired)
	}
}

// BenchmarkOTelSettled measures one settlement, metrics only.
func BenchmarkOTelSettled(b *testing.B) {
	obs, ctx := benchObserver(b, false), context.Background()
	e := sluice.SettleEvent{Dimension: "openai#tpm", Estimate: 500, Actual: 420, Applied: -80000}
	b.ReportAllocs()
	for b.Loop() {
		obs.Settled(ctx, e)
	}
}

// BenchmarkOTelReleased measures one release.
func BenchmarkOTelReleased(b *testing.B) {
	obs, ctx := benchObserver(b, false), context.Background()
	e := sluice.ReleaseEvent{Lease: "l", Held: time.Second, Recorded: true, Released: true}
	b.ReportAllocs()
	for b.Loop() {
		obs.Released(ctx, e)
	}
}
