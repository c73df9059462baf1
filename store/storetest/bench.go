package storetest

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// RunBenchmarks runs the suite's benchmarks against the store h opens. Every
// benchmark reuses its AcquireResult, as the contract allows, so a store
// that allocates nothing per acquisition reports 0 allocs/op.
func RunBenchmarks(b *testing.B, h Harness) {
	b.Helper()
	if h.NewStore == nil {
		b.Fatal("storetest: Harness.NewStore is required")
	}
	// Large enough that no benchmark ever runs a bucket dry at a fixed time.
	big := store.Bucket{Name: "bench#rpm", Config: bucket.PerPeriod(bucket.Requests, bucket.MaxCapacity, time.Minute)}
	setup := func(b *testing.B, bs ...store.Bucket) store.Store {
		s := h.NewStore(b)
		for _, bk := range bs {
			if err := s.PutBucket(context.Background(), store.PutBucketRequest{Now: Base, Bucket: bk}); err != nil {
				b.Fatal(err)
			}
		}
		return s
	}
	mustGrant := func(b *testing.B, err error, res *store.AcquireResult) {
		if err != nil {
			b.Fatal(err)
		}
		if !res.Granted {
			b.Fatalf("denied (retry in %s); the benchmark bucket ran dry", res.RetryIn)
		}
	}

	b.Run("AcquireSerial", func(b *testing.B) {
		s := setup(b, big)
		ctx := context.Background()
		req := &store.AcquireRequest{Now: Base, Items: []store.Item{{Dimension: big.Name, Cost: 1}}, ID: idFor("bench"), TTL: time.Minute}
		var res store.AcquireResult
		b.ReportAllocs()
		for b.Loop() {
			err := s.Acquire(ctx, req, &res)
			mustGrant(b, err, &res)
		}
	})

	b.Run("Acquire3DimConcurrentRelease", func(b *testing.B) {
		tokens := store.Bucket{Name: "bench#tpm", Config: bucket.PerPeriod(bucket.Tokens, bucket.MaxCapacity, time.Minute)}
		s := setup(b, big, tokens, slots("bench#concurrent", 10))
		ctx := context.Background()
		req := &store.AcquireRequest{Now: Base, TTL: time.Minute,
			Items: []store.Item{{Dimension: big.Name, Cost: 1}, {Dimension: tokens.Name, Cost: 500}, {Dimension: "bench#concurrent", Cost: 1}}}
		var res store.AcquireResult
		var n uint64
		b.ReportAllocs()
		for b.Loop() {
			n++
			binary.BigEndian.PutUint64(req.ID[8:], n)
			req.ID[0] = 1
			err := s.Acquire(ctx, req, &res)
			mustGrant(b, err, &res)
			if _, err := s.Release(ctx, store.ReleaseRequest{Now: Base, ID: req.ID}); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("ParallelHotKey", func(b *testing.B) {
		s := setup(b, big)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			req := &store.AcquireRequest{Now: Base, Items: []store.Item{{Dimension: big.Name, Cost: 1}}, ID: idFor("bench"), TTL: time.Minute}
			var res store.AcquireResult
			for pb.Next() {
				err := s.Acquire(ctx, req, &res)
				mustGrant(b, err, &res)
			}
		})
	})

	b.Run("ParallelDistinctKeys", func(b *testing.B) {
		s := setup(b)
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			name := fmt.Sprintf("bench#key%d", next.Add(1))
			if err := s.PutBucket(ctx, store.PutBucketRequest{Now: Base, Bucket: store.Bucket{Name: name, Config: big.Config}}); err != nil {
				b.Error(err)
				return
			}
			req := &store.AcquireRequest{Now: Base, Items: []store.Item{{Dimension: name, Cost: 1}}, ID: idFor(name), TTL: time.Minute}
			var res store.AcquireResult
			for pb.Next() {
				err := s.Acquire(ctx, req, &res)
				mustGrant(b, err, &res)
			}
		})
	})

	runUsageBenchmarks(b, h)
}
