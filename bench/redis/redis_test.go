// Package redis compares, in one run against the same real redis-server, a
// bare PING, github.com/go-redis/redis_rate's AllowN and redisstore
// acquisitions. The server is started on a free loopback port, as the
// redisstore tests do; docs/benchmarks.md records the figures.
package redis

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/internal/testing/testproc"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/redisstore"
)

// addr is the redis-server every benchmark of this binary shares.
var addr string

var prefixes atomic.Int64

func TestMain(m *testing.M) {
	if testproc.SkipPackage("redis-server") {
		os.Exit(0)
	}
	srv, err := redistest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: redis-server is required for these benchmarks:", err)
		os.Exit(1)
	}
	addr = srv.Addr
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

func uniquePrefix() string { return fmt.Sprintf("b%d:", prefixes.Add(1)) }

// BenchmarkRedis measures, against the same server and client, a bare
// PING, redis_rate AllowN and a one-dimension redisstore acquisition on the
// server clock (the default, with batching): serial latency and parallel
// throughput.
func BenchmarkRedis(b *testing.B) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	run(b, "Ping", func() error { return c.Ping(ctx).Err() })

	lim := redis_rate.NewLimiter(c)
	limit := redis_rate.Limit{Rate: 1 << 40, Burst: 1 << 40, Period: time.Minute}
	key := uniquePrefix() + "rate"
	run(b, "RedisRateAllowN", func() error {
		r, err := lim.AllowN(ctx, key, limit, 1)
		if err == nil && r.Allowed != 1 {
			err = fmt.Errorf("denied: %+v", r)
		}
		return err
	})

	s, err := redisstore.New(c, redisstore.WithPrefix(uniquePrefix()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cfg := bucket.PerPeriod(bucket.Requests, bucket.MaxCapacity, time.Minute)
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: store.Bucket{Name: "bench#rpm", Config: cfg}}); err != nil {
		b.Fatal(err)
	}
	items := []store.Item{{Dimension: "bench#rpm", Cost: 1}}
	run(b, "Acquire1DimBatched", func() error {
		var res store.AcquireResult
		req := store.AcquireRequest{Items: items, ID: store.NewLeaseID(), TTL: time.Minute}
		err := s.Acquire(ctx, &req, &res)
		if err == nil && !res.Granted {
			err = fmt.Errorf("denied: %+v", res)
		}
		return err
	})
}

// run measures op serially and from 8×GOMAXPROCS goroutines.
func run(b *testing.B, name string, op func() error) {
	b.Run(name+"/serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(name+"/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
