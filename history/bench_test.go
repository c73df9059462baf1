package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/store/memstore"
)

// BenchmarkAcquireWithRecorder compares Client.Acquire on memstore without
// an observer ("off"), with one that does nothing ("noop": what any
// observer costs the Client), and with the Recorder's ("on"), in the same
// run: batches of each alternate, and the metrics are each one's time per
// acquisition and the ratios on/off and on/noop.
func BenchmarkAcquireWithRecorder(b *testing.B) {
	ctx := context.Background()
	newBench := func(obs *sluice.Observer) *sluice.Client {
		st := memstore.New()
		b.Cleanup(func() { st.Close() })
		var opts []sluice.Option
		if obs != nil {
			opts = append(opts, sluice.WithObserver(obs))
		}
		c, err := sluice.New(st, opts...)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.PutBucket(ctx, sluice.Bucket{Name: "openai#rpm", Config: sluice.PerPeriod(sluice.Requests, 1<<30, time.Second)}); err != nil {
			b.Fatal(err)
		}
		return c
	}
	st := memstore.New()
	b.Cleanup(func() { st.Close() })
	rec, err := history.New(st)
	if err != nil {
		b.Fatal(err)
	}
	off, on := newBench(nil), newBench(rec.Observer())
	noop := newBench(&sluice.Observer{Acquired: func(context.Context, sluice.AcquireEvent) {}})
	run := func(c *sluice.Client, n int) time.Duration {
		start := time.Now()
		for range n {
			res, err := c.Acquire(ctx, "openai#rpm", sluice.WithCaller("web"))
			if err != nil || !res.Granted() {
				b.Fatalf("Acquire = %+v, %v", res, err)
			}
		}
		return time.Since(start)
	}
	const batch = 128
	clients := [3]*sluice.Client{off, noop, on}
	var spent [3]time.Duration
	var n int
	for b.Loop() {
		for i := range 3 {
			j := (i + n) % 3 // each first in turn
			spent[j] += run(clients[j], batch)
		}
		n++
	}
	ops := float64(n * batch)
	b.ReportMetric(float64(spent[0].Nanoseconds())/ops, "ns/acquire-off")
	b.ReportMetric(float64(spent[1].Nanoseconds())/ops, "ns/acquire-noop")
	b.ReportMetric(float64(spent[2].Nanoseconds())/ops, "ns/acquire-on")
	b.ReportMetric(float64(spent[2])/float64(spent[0]), "on/off")
	b.ReportMetric(float64(spent[2])/float64(spent[1]), "on/noop")
}

// BenchmarkRecorderAcquired measures the Recorder's callback alone, for
// one granted acquisition of one dimension.
func BenchmarkRecorderAcquired(b *testing.B) {
	st := memstore.New()
	b.Cleanup(func() { st.Close() })
	rec, err := history.New(st)
	if err != nil {
		b.Fatal(err)
	}
	acquired := rec.Observer().Acquired
	ctx := context.Background()
	ev := sluice.AcquireEvent{Dimensions: []sluice.Request{{Dimension: "openai#rpm", Cost: 1}}, Caller: "web",
		Outcome: sluice.Granted, Results: []sluice.DimensionResult{{Dimension: "openai#rpm", Cost: 1}}}
	b.ReportAllocs()
	for b.Loop() {
		acquired(ctx, ev)
	}
}
