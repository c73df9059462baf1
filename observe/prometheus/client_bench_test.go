package prometheus_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	sluiceprom "github.com/ontopix/sluice/observe/prometheus"
	"github.com/ontopix/sluice/store/memstore"
	prom "github.com/prometheus/client_golang/prometheus"
)

// BenchmarkClientAcquire measures Client.Acquire over memstore without an
// observer and with the Prometheus adapter; the difference is the
// adapter's cost per acquisition.
func BenchmarkClientAcquire(b *testing.B) {
	clock := sluice.ClockFunc(func() time.Time { return time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC) })
	for _, bc := range []struct {
		name string
		opts func(*testing.B) []sluice.Option
	}{
		{"none", func(*testing.B) []sluice.Option { return nil }},
		{"prometheus", func(b *testing.B) []sluice.Option {
			obs, err := sluiceprom.New(prom.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			return []sluice.Option{sluice.WithObserver(obs)}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			client, err := sluice.New(memstore.New(), append(bc.opts(b), sluice.WithClock(clock))...)
			if err != nil {
				b.Fatal(err)
			}
			if err := client.PutBucket(ctx, sluice.Bucket{Name: "openai#rpm", Config: sluice.PerMinute(sluice.Requests, 1_000_000_000)}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Acquire(ctx, "openai#rpm"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
