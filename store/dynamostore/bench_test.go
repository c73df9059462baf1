package dynamostore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// The benchmarks run against DynamoDB Local (see docs/stores/dynamodb.md,
// Benchmarks). Each reports round trips, RCU and WCU per acquisition as
// measured by the tap (ReturnConsumedCapacity TOTAL on every request).

var paths = []struct {
	name string
	opts []Option
}{{"fast", nil}, {"readfirst", []Option{WithReadThenTransact()}}}

// benchStore opens a store on a fresh table with one hot bucket large
// enough never to run dry, through a tap measuring capacity.
func benchStore(b *testing.B, opts ...Option) (*Store, *tap) {
	tp := newTap()
	tp.capacity = true
	db := tp.client()
	s := openStore(b, db, newTable(b, db), opts...)
	put(b, s, time.Now(), store.Bucket{Name: "hot#rpm", Config: bucket.PerPeriod(bucket.Requests, bucket.MaxCapacity, time.Minute)})
	return s, tp
}

func report(b *testing.B, tp *tap, ops int64) {
	m, rcu, wcu := tp.snapshot()
	n := 0
	for _, c := range m {
		n += c
	}
	if ops > 0 {
		b.ReportMetric(float64(n)/float64(ops), "roundtrips/op")
		b.ReportMetric(rcu/float64(ops), "RCU/op")
		b.ReportMetric(wcu/float64(ops), "WCU/op")
	}
}

// BenchmarkAcquire is one worker acquiring from one bucket: the
// uncontended cost of each path.
func BenchmarkAcquire(b *testing.B) {
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			s, tp := benchStore(b, p.opts...)
			ctx := context.Background()
			var res store.AcquireResult
			req := &store.AcquireRequest{Items: []store.Item{{Dimension: "hot#rpm"}}, TTL: time.Minute, Caller: "bench"}
			for range 50 { // warm the JVM and the fast path's row
				req.Now, req.ID = time.Now(), store.NewLeaseID()
				if err := s.Acquire(ctx, req, &res); err != nil {
					b.Fatal(err)
				}
			}
			tp.reset()
			b.ResetTimer()
			for b.Loop() {
				req.Now, req.ID = time.Now(), store.NewLeaseID()
				if err := s.Acquire(ctx, req, &res); err != nil || !res.Granted {
					b.Fatal(res, err)
				}
			}
			b.StopTimer()
			report(b, tp, int64(b.N))
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acquires/s")
		})
	}
}

// BenchmarkHotBucket is 16 workers on one bucket through the root client,
// which backs off 25–200 ms on contention up to MaxRetries (3) and then
// answers RETRY_IN, as the original algorithm does: goodput is grants per second.
func BenchmarkHotBucket(b *testing.B) {
	for _, p := range paths {
		b.Run(p.name+"/workers=16", func(b *testing.B) {
			s, tp := benchStore(b, p.opts...)
			c, err := sluice.New(s)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for range 20 {
				if _, err := c.Acquire(ctx, "hot#rpm"); err != nil {
					b.Fatal(err)
				}
			}
			tp.reset()
			var grants, denied, calls atomic.Int64
			b.SetParallelism(max(1, 16/max(1, testingProcs())))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					calls.Add(1)
					r, err := c.Acquire(ctx, "hot#rpm")
					switch {
					case err != nil:
						b.Error(err)
						return
					case err == nil && r.Granted():
						grants.Add(1)
					default:
						denied.Add(1)
					}
				}
			})
			b.StopTimer()
			secs := b.Elapsed().Seconds()
			report(b, tp, calls.Load())
			b.ReportMetric(float64(grants.Load())/secs, "grants/s")
			b.ReportMetric(float64(denied.Load())/float64(calls.Load()), "retry_in-fraction")
		})
	}
}
