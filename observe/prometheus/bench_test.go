package prometheus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	sluiceprom "github.com/ontopix/sluice/observe/prometheus"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	prom "github.com/prometheus/client_golang/prometheus"
)

func benchObserver(b *testing.B) *sluice.Observer {
	b.Helper()
	obs, err := sluiceprom.New(prom.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	return obs
}

// BenchmarkPrometheusAcquired measures one granted acquisition of two
// dimensions.
func BenchmarkPrometheusAcquired(b *testing.B) {
	obs, ctx := benchObserver(b), context.Background()
	e := sluice.AcquireEvent{Dimensions: both, Outcome: sluice.Granted, Duration: time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		obs.Acquired(ctx, e)
	}
}

// BenchmarkPrometheusAcquiredParallel measures the same from every
// processor at once.
func BenchmarkPrometheusAcquiredParallel(b *testing.B) {
	obs, ctx := benchObserver(b), context.Background()
	e := sluice.AcquireEvent{Dimensions: both, Outcome: sluice.Granted, Duration: time.Millisecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			obs.Acquired(ctx, e)
		}
	})
}

// BenchmarkPrometheusSettled measures one settlement.
func BenchmarkPrometheusSettled(b *testing.B) {
	obs, ctx := benchObserver(b), context.Background()
	e := sluice.SettleEvent{Dimension: "openai#tpm", Estimate: 500, Actual: 420, Applied: -80000}
	b.ReportAllocs()
	for b.Loop() {
		obs.Settled(ctx, e)
	}
}

// BenchmarkPrometheusReleased measures one release.
func BenchmarkPrometheusReleased(b *testing.B) {
	obs, ctx := benchObserver(b), context.Background()
	e := sluice.ReleaseEvent{Lease: "l", Held: time.Second, Recorded: true, Released: true}
	b.ReportAllocs()
	for b.Loop() {
		obs.Released(ctx, e)
	}
}

// BenchmarkPrometheusStoreError measures one store error.
func BenchmarkPrometheusStoreError(b *testing.B) {
	obs, ctx := benchObserver(b), context.Background()
	e := sluice.StoreErrorEvent{Op: "acquire", Kind: sluice.KindUnavailable, Err: sluice.ErrUnavailable}
	b.ReportAllocs()
	for b.Loop() {
		obs.StoreError(ctx, e)
	}
}

// BenchmarkStateCollect measures one scrape of a StateCollector that
// reads 100 buckets over memstore every time (no cache).
func BenchmarkStateCollect(b *testing.B) {
	ctx := context.Background()
	client, err := sluice.New(memstore.New())
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	for i := range 100 {
		if err := client.PutBucket(ctx, sluice.Bucket{Name: fmt.Sprintf("v#d%03d", i), Config: sluice.PerMinute(sluice.Tokens, 1000)}); err != nil {
			b.Fatal(err)
		}
	}
	col, err := sluiceprom.NewStateCollector(client, sluiceprom.WithStateCacheFor(0))
	if err != nil {
		b.Fatal(err)
	}
	reg := prom.NewRegistry()
	reg.MustRegister(col)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTransportEvent measures one vendor call's update.
func BenchmarkTransportEvent(b *testing.B) {
	f, err := sluiceprom.NewTransportEvents(prom.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	e := transport.Event{Vendor: vendors.OpenAI, Model: "gpt-4o", Status: 200, Outcome: transport.Settled, Waited: time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		f(ctx, e)
	}
}
