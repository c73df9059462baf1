package memory

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"golang.org/x/time/rate"
)

// A limit high enough that every call is allowed, as in the peers' own
// harnesses: the benchmarks measure the decision, not the waiting.
const huge = 1_000_000_000_000

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newMem(b *testing.B, names ...string) *memstore.Store {
	st := memstore.New()
	for _, n := range names {
		cfg := bucket.PerPeriod(bucket.Requests, huge, time.Millisecond)
		if err := st.PutBucket(context.Background(), store.PutBucketRequest{Now: t0, Bucket: store.Bucket{Name: n, Config: cfg}}); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// BenchmarkMemstoreAcquire is the store-level single-dimension requests
// acquire: no lease record, result reused.
func BenchmarkMemstoreAcquire(b *testing.B) {
	st := newMem(b, "openai#rpm")
	req := store.AcquireRequest{Items: []store.Item{{Dimension: "openai#rpm", Cost: 1}}, ID: store.NewLeaseID(), TTL: time.Minute}
	var res store.AcquireResult
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req.Now = t0.Add(time.Duration(i) * time.Microsecond)
		if err := st.Acquire(context.Background(), &req, &res); err != nil || !res.Granted {
			b.Fatal(err, res.Granted)
		}
	}
}

// BenchmarkClientAcquire is the public API: Client.Acquire on memstore.
func BenchmarkClientAcquire(b *testing.B) {
	c, err := sluice.New(newMem(b, "openai#rpm"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res, err := c.Acquire(ctx, "openai#rpm"); err != nil || !res.Granted() {
			b.Fatal(err, res.Outcome)
		}
	}
}

// BenchmarkClientConcurrentAcquireRelease acquires a concurrent slot
// (recorded lease) and releases it.
func BenchmarkClientConcurrentAcquireRelease(b *testing.B) {
	st := memstore.New()
	ctx := context.Background()
	if err := st.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: store.Bucket{Name: "elevenlabs#concurrent", Config: bucket.ConcurrentSlots(1000)}}); err != nil {
		b.Fatal(err)
	}
	c, _ := sluice.New(st)
	b.ReportAllocs()
	for b.Loop() {
		res, err := c.Acquire(ctx, "elevenlabs#concurrent")
		if err != nil || !res.Granted() {
			b.Fatal(err, res.Outcome)
		}
		if err := res.Lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClientAcquireMany3 is rpm + tpm + concurrent with release.
func BenchmarkClientAcquireMany3(b *testing.B) {
	st := newMem(b, "openai#rpm", "openai#tpm")
	ctx := context.Background()
	_ = st.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: store.Bucket{Name: "openai#concurrent", Config: bucket.ConcurrentSlots(1000)}})
	c, _ := sluice.New(st)
	reqs := []sluice.Request{{Dimension: "openai#rpm", Cost: 1}, {Dimension: "openai#tpm", Cost: 500}, {Dimension: "openai#concurrent", Cost: 1}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := c.AcquireMany(ctx, reqs)
		if err != nil || !res.Granted() {
			b.Fatal(err, res.Outcome)
		}
		if err := res.Lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkXRateAllowN(b *testing.B) {
	l := rate.NewLimiter(rate.Inf, 1)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if !l.AllowN(now, 1) {
			b.Fatal("denied")
		}
	}
}

func BenchmarkXRateFiniteAllowN(b *testing.B) {
	l := rate.NewLimiter(rate.Limit(huge), huge)
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if !l.AllowN(now.Add(time.Duration(i)*time.Microsecond), 1) {
			b.Fatal("denied")
		}
	}
}

func BenchmarkXRateReserveN(b *testing.B) {
	l := rate.NewLimiter(rate.Limit(huge), huge)
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if r := l.ReserveN(now.Add(time.Duration(i)*time.Microsecond), 1); !r.OK() {
			b.Fatal("not ok")
		}
	}
}

// Parallel, one hot key.
func BenchmarkParallelHotMemstore(b *testing.B) {
	st := newMem(b, "openai#rpm")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := store.AcquireRequest{Items: []store.Item{{Dimension: "openai#rpm", Cost: 1}}, ID: store.NewLeaseID(), TTL: time.Minute, Now: t0}
		var res store.AcquireResult
		for pb.Next() {
			if err := st.Acquire(context.Background(), &req, &res); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkParallelHotXRate(b *testing.B) {
	l := rate.NewLimiter(rate.Limit(huge), huge)
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.AllowN(now, 1)
		}
	})
}

// Parallel, each goroutine on its own key: scales with cores when no global
// lock serialises the store.
func BenchmarkParallelDistinctMemstore(b *testing.B) {
	const keys = 64
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("vendor%d#rpm", i)
	}
	st := newMem(b, names...)
	var next atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		name := names[int(next.Add(1)-1)%keys]
		req := store.AcquireRequest{Items: []store.Item{{Dimension: name, Cost: 1}}, ID: store.NewLeaseID(), TTL: time.Minute, Now: t0}
		var res store.AcquireResult
		for pb.Next() {
			if err := st.Acquire(context.Background(), &req, &res); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMemstoreConcurrentAcquireRelease is the store-level concurrent
// slot: acquire (writes a lease record) and release it.
func BenchmarkMemstoreConcurrentAcquireRelease(b *testing.B) {
	st := memstore.New()
	ctx := context.Background()
	if err := st.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: store.Bucket{Name: "elevenlabs#concurrent", Config: bucket.ConcurrentSlots(1000)}}); err != nil {
		b.Fatal(err)
	}
	req := store.AcquireRequest{Items: []store.Item{{Dimension: "elevenlabs#concurrent", Cost: 1}}, TTL: time.Minute, Now: t0}
	var res store.AcquireResult
	b.ReportAllocs()
	for b.Loop() {
		req.ID = store.NewLeaseID()
		if err := st.Acquire(ctx, &req, &res); err != nil || !res.Granted {
			b.Fatal(err, res.Granted)
		}
		if rr, err := st.Release(ctx, store.ReleaseRequest{Now: t0, ID: req.ID}); err != nil || !rr.Released {
			b.Fatal(err, rr.Released)
		}
	}
}
