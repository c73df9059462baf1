package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/storetest"
)

// BenchmarkRedis compares, in one run against the same standalone server,
// a bare PING and redisstore acquisitions on the server clock (the
// default): serial latency and parallel throughput. The client is built
// with ContextTimeoutEnabled, as docs/stores/redis.md recommends
// (BenchmarkBoundedAcquire measures the other kind). The comparison with
// go-redis/redis_rate lives in the bench module (bench/redis), so that the
// library does not depend on it.
func BenchmarkRedis(b *testing.B) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: standalone.Addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { c.Close() })
	b.Run("Ping/serial", func(b *testing.B) {
		for b.Loop() {
			if err := c.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Ping/parallel", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := c.Ping(ctx).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})

	for _, mode := range []struct {
		name string
		opt  Option
	}{{"", WithBatching(1)}, {"Batched", WithBatching(DefaultMaxBatch)}} {
		s, err := New(c, WithPrefix(uniquePrefix()), mode.opt)
		if err != nil {
			b.Fatal(err)
		}
		benchAcquire(b, s, mode.name)
		s.Close()
	}
}

// benchAcquire runs the acquisition benchmarks of BenchmarkRedis on s.
func benchAcquire(b *testing.B, s *Store, suffix string) {
	ctx := context.Background()
	for _, bk := range []store.Bucket{
		{Name: "bench#rpm", Config: bucket.PerPeriod(bucket.Requests, bucket.MaxCapacity, time.Minute)},
		{Name: "bench#tpm", Config: bucket.PerPeriod(bucket.Tokens, bucket.MaxCapacity, time.Minute)},
		{Name: "bench#concurrent", Config: bucket.ConcurrentSlots(bucket.MaxCapacity)},
	} {
		if err := s.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: bk}); err != nil {
			b.Fatal(err)
		}
	}
	one := []store.Item{{Dimension: "bench#rpm", Cost: 1}}
	three := []store.Item{{Dimension: "bench#rpm", Cost: 1}, {Dimension: "bench#tpm", Cost: 500}, {Dimension: "bench#concurrent", Cost: 1}}
	acq := func(b *testing.B, items []store.Item, res *store.AcquireResult) bool {
		req := store.AcquireRequest{Items: items, ID: store.NewLeaseID(), TTL: time.Minute}
		if err := s.Acquire(ctx, &req, res); err != nil || !res.Granted {
			b.Error(res, err)
			return false
		}
		return true
	}
	for _, tc := range []struct {
		name  string
		items []store.Item
	}{{"Acquire1Dim", one}, {"Acquire3DimLease", three}} {
		b.Run(tc.name+suffix+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			var res store.AcquireResult
			for b.Loop() {
				if !acq(b, tc.items, &res) {
					return
				}
			}
		})
		b.Run(tc.name+suffix+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				var res store.AcquireResult
				for pb.Next() {
					if !acq(b, tc.items, &res) {
						return
					}
				}
			})
		})
	}
}

// BenchmarkConformance runs the shared suite's benchmarks (caller clock).
func BenchmarkConformance(b *testing.B) {
	storetest.RunBenchmarks(b, storetest.Harness{NewStore: func(tb testing.TB) store.Store { return newStore(tb) }})
}

// TestMemoryUsage measures, with MEMORY USAGE, what a bucket and a lease
// record cost on the server; docs/stores/redis.md quotes the figures.
func TestMemoryUsage(t *testing.T) {
	c := newClient(t)
	s := newStoreOn(t, c)
	ctx := context.Background()
	put(t, s, t0, store.Bucket{Name: "openai#tpm", Config: bucket.PerPeriod(bucket.Tokens, 2_000_000, time.Minute)})
	put(t, s, t0, store.Bucket{Name: "openai#concurrent", Config: bucket.ConcurrentSlots(100_000)})
	acquire(t, s, t0, store.Item{Dimension: "openai#tpm", Cost: 1500})
	mem := func(key string) int64 {
		n, err := c.MemoryUsage(ctx, key).Result()
		if err != nil {
			t.Fatalf("MEMORY USAGE %s: %v", key, err)
		}
		return n
	}
	bucketBytes := mem(s.prefix + "{openai}#tpm")
	if bucketBytes <= 0 {
		t.Fatal("bucket uses no memory?")
	}
	t.Logf("bucket hash: %d bytes", bucketBytes)
	op := store.NewLeaseID()
	var r store.AcquireResult
	if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "openai#tpm", Cost: 1}}, ID: store.NewLeaseID(), TTL: time.Minute, Op: op}, &r); err != nil || !r.Granted {
		t.Fatalf("acquire: %+v, %v", r, err)
	}
	t.Logf("op key of a one-dimension acquisition without a record (kept %s): %d bytes", store.OpWindow, mem(s.prefix+"{openai}:op:acquire:"+op.String()))
	if _, err := s.Adjust(ctx, store.AdjustRequest{Now: t0, ID: store.NewLeaseID(), Dimension: "openai#tpm", Delta: -1, Held: 1, ExpiresAt: t0.Add(time.Minute), Op: op}); err != nil {
		t.Fatal(err)
	}
	t.Logf("op key of an adjustment: %d bytes", mem(s.prefix+"{openai}:op:adjust:"+op.String()))
	put(t, s, t0, store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 10_000, time.Minute)})
	if _, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: "openai#rpm", Until: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	t.Logf("bucket hash after a cooldown (field u): %d bytes", mem(s.prefix+"{openai}#rpm"))
	zBefore, vBefore := int64(0), int64(0)
	const n = 1000
	var leaseBytes int64
	for i := range n {
		res := acquire(t, s, t0, store.Item{Dimension: "openai#tpm", Cost: 1}, store.Item{Dimension: "openai#concurrent"})
		if !res.Recorded {
			t.Fatal("not recorded")
		}
		if i == 0 {
			zBefore, vBefore = mem(s.prefix+"{openai}:dz#concurrent"), mem(s.prefix+"{openai}:leases")
			ls, err := s.Leases(ctx, store.LeaseQuery{Now: t0, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			leaseBytes = mem(s.prefix + "{openai}:lease:" + ls[0].ID.String())
		}
	}
	zAfter, vAfter := mem(s.prefix+"{openai}:dz#concurrent"), mem(s.prefix+"{openai}:leases")
	t.Logf("lease hash (2 items): %d bytes; index entries per lease: %d bytes per dimension index, %d bytes in the vendor index (at %d leases)",
		leaseBytes, (zAfter-zBefore)/(n-1), (vAfter-vBefore)/(n-1), n)
}

// BenchmarkBoundedAcquire measures what bounding an operation costs on the
// hot path: a client built with ContextTimeoutEnabled bounds itself (no
// extra goroutine), one without it runs each command on a goroutine the
// store can abandon, and WithTimeout(0) with a context that cannot end is
// the unbounded baseline.
func BenchmarkBoundedAcquire(b *testing.B) {
	for _, tc := range []struct {
		name    string
		aware   bool
		timeout time.Duration
	}{{"Unbounded", false, 0}, {"ContextAwareClient", true, DefaultTimeout}, {"DefaultClient", false, DefaultTimeout}} {
		c := redis.NewClient(&redis.Options{Addr: standalone.Addr, ContextTimeoutEnabled: tc.aware})
		s, err := New(c, WithPrefix(uniquePrefix()), WithTimeout(tc.timeout), WithBatching(1))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if err := s.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: store.Bucket{Name: "bench#rpm",
			Config: bucket.PerPeriod(bucket.Requests, bucket.MaxCapacity, time.Minute)}}); err != nil {
			b.Fatal(err)
		}
		items := []store.Item{{Dimension: "bench#rpm", Cost: 1}}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var res store.AcquireResult
			for b.Loop() {
				req := store.AcquireRequest{Items: items, ID: store.NewLeaseID(), TTL: time.Minute}
				if err := s.Acquire(ctx, &req, &res); err != nil || !res.Granted {
					b.Fatal(res, err)
				}
			}
		})
		s.Close()
		c.Close()
	}
}
