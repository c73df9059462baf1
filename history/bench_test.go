package history_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/redisstore"
)

// BenchmarkAcquireWithRecorder compares Client.Acquire without an
// observer ("off"), with one that does nothing ("noop": what any observer
// costs the Client), and with the Recorder's ("on"), its Run writing every
// second to the same store, in the same run: batches of each alternate,
// and the metrics are each one's time per acquisition and the ratios
// on/off and on/noop. It runs on the memory store and on Redis.
func BenchmarkAcquireWithRecorder(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		mem := memstore.New()
		b.Cleanup(func() { mem.Close() })
		benchAcquire(b, func() store.Store { return mem }, 128)
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.New(b)
		benchAcquire(b, func() store.Store {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
			st, err := redisstore.New(rdb)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close(); rdb.Close() })
			return st
		}, 16)
	})
}

func benchAcquire(b *testing.B, open func() store.Store, batch int) {
	ctx := context.Background()
	newBench := func(obs *sluice.Observer, name string) *sluice.Client {
		var opts []sluice.Option
		if obs != nil {
			opts = append(opts, sluice.WithObserver(obs))
		}
		c, err := sluice.New(open(), opts...)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.PutBucket(ctx, sluice.Bucket{Name: name, Config: sluice.PerPeriod(sluice.Requests, 1<<30, time.Second)}); err != nil {
			b.Fatal(err)
		}
		return c
	}
	rec, err := history.New(open(), history.WithFlushEvery(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rec.Run(runCtx) }()
	b.Cleanup(func() { stop(); <-done })
	clients := [3]*sluice.Client{
		newBench(nil, "off#rpm"),
		newBench(&sluice.Observer{Acquired: func(context.Context, sluice.AcquireEvent) {}}, "noop#rpm"),
		newBench(rec.Observer(), "on#rpm"),
	}
	dims := [3]string{"off#rpm", "noop#rpm", "on#rpm"}
	run := func(i int) time.Duration {
		start := time.Now()
		for range batch {
			res, err := clients[i].Acquire(ctx, dims[i], sluice.WithCaller("web"))
			if err != nil || !res.Granted() {
				b.Fatalf("Acquire = %+v, %v", res, err)
			}
		}
		return time.Since(start)
	}
	var spent [3]time.Duration
	var n int
	for b.Loop() {
		for i := range 3 {
			j := (i + n) % 3 // each first in turn
			spent[j] += run(j)
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

// BenchmarkLive reads one dimension's last minute, as the console does
// once per dimension per refresh, with 100 dimensions of 10 callers each
// active in the last 15 minutes. It holds the Recorder's lock throughout,
// so its time is a pause of the acquire path's callbacks.
func BenchmarkLive(b *testing.B) {
	rec, err := history.New(memstore.New())
	if err != nil {
		b.Fatal(err)
	}
	obs := rec.Observer()
	ctx := context.Background()
	for d := range 100 {
		for c := range 10 {
			obs.Acquired(ctx, sluice.AcquireEvent{Dimensions: []sluice.Request{{Dimension: "d" + strconv.Itoa(d), Cost: 1}},
				Caller: "c" + strconv.Itoa(c), Outcome: sluice.Granted})
		}
	}
	b.ResetTimer()
	for b.Loop() {
		_ = rec.Live("d50")
	}
}
