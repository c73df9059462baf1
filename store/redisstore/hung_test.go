package redisstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/store"
)

// hungOps returns every operation of the store on one set of dimensions,
// each as a function of the context it runs under.
func hungOps(s *Store) map[string]func(context.Context) error {
	rpm := []store.Item{{Dimension: "h#rpm"}}
	return map[string]func(context.Context) error{
		"acquire": func(ctx context.Context) error {
			var res store.AcquireResult
			return s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: rpm, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
		},
		"release": func(ctx context.Context) error {
			_, err := s.Release(ctx, store.ReleaseRequest{Now: t0, ID: store.NewLeaseID()})
			return err
		},
		"extend": func(ctx context.Context) error {
			_, err := s.Extend(ctx, store.ExtendRequest{Now: t0, ID: store.NewLeaseID(), TTL: time.Minute})
			return err
		},
		"adjust": func(ctx context.Context) error {
			_, err := s.Adjust(ctx, store.AdjustRequest{Now: t0, ID: store.NewLeaseID(), Dimension: "h#tpm", Delta: 5, Held: 10})
			return err
		},
		"penalize": func(ctx context.Context) error {
			_, err := s.Penalize(ctx, store.PenalizeRequest{Now: t0, Dimension: "h#rpm", FactorMilli: 500})
			return err
		},
		"cooldown": func(ctx context.Context) error {
			_, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: "h#rpm", Until: t0.Add(time.Second)})
			return err
		},
		"sync": func(ctx context.Context) error {
			_, err := s.Sync(ctx, store.SyncRequest{Now: t0, Dimension: "h#rpm", Remaining: 5})
			return err
		},
		"peek": func(ctx context.Context) error {
			_, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"h#rpm"}})
			return err
		},
		"put": func(ctx context.Context) error {
			return s.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: store.Bucket{Name: "h#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)}})
		},
		"delete": func(ctx context.Context) error { return s.DeleteBucket(ctx, store.DeleteBucketRequest{Name: "h#gone"}) },
		"list buckets": func(ctx context.Context) error {
			_, err := s.ListBuckets(ctx, store.ListBucketsRequest{Now: t0})
			return err
		},
		"leases": func(ctx context.Context) error {
			_, err := s.Leases(ctx, store.LeaseQuery{Now: t0})
			return err
		},
		"reconcile": func(ctx context.Context) error {
			_, err := s.Reconcile(ctx, store.ReconcileRequest{Now: t0, Limit: store.DefaultReconcileLimit})
			return err
		},
		"8 concurrent acquires": func(ctx context.Context) error {
			errs := make(chan error, 8)
			for range 8 {
				go func() {
					var res store.AcquireResult
					errs <- s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: rpm, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
				}()
			}
			var err error
			for range 8 {
				if e := <-errs; err == nil || !errors.Is(e, store.ErrUnavailable) {
					err = e
				}
			}
			return err
		},
	}
}

// TestHungServerBounded SIGSTOPs a private redis-server and runs every
// operation through clients built with go-redis's default options (which
// ignore contexts unless ContextTimeoutEnabled is set) and with
// ContextTimeoutEnabled, batched and not: each operation fails with
// ErrUnavailable, bounded by the store's timeout or by the caller's
// deadline when that is sooner. The elapsed times are logged (they are the
// figures of docs/reliability-redis.md); the upper bound is a loose sanity
// check against an unbounded hang.
func TestHungServerBounded(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	type variant struct {
		name     string
		opts     redis.Options
		batching int
	}
	variants := []variant{
		{"default client", redis.Options{}, 1},
		{"default client, batched", redis.Options{}, DefaultMaxBatch},
		{"context-aware client", redis.Options{ContextTimeoutEnabled: true}, 1},
		{"context-aware client, batched", redis.Options{ContextTimeoutEnabled: true}, DefaultMaxBatch},
	}
	const timeout = 300 * time.Millisecond
	var stores []*Store
	for _, v := range variants {
		o := v.opts
		o.Addr = srv.Addr
		c := redis.NewClient(&o)
		t.Cleanup(func() { c.Close() })
		s := newStoreOn(t, c, WithTimeout(timeout), WithBatching(v.batching))
		for _, b := range []store.Bucket{
			{Name: "h#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)},
			{Name: "h#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)},
		} {
			put(t, s, t0, b)
		}
		acquire(t, s, t0, store.Item{Dimension: "h#rpm"}) // a pooled connection
		stores = append(stores, s)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Cont() }()
	// Each case runs in parallel with the others: the bound is per
	// operation, and the hung server answers none of them.
	var wg sync.WaitGroup
	for i, v := range variants {
		for _, bound := range []struct {
			name     string
			deadline time.Duration // the caller's; 0 none
			want     time.Duration
		}{{"store timeout", 0, timeout}, {"caller deadline", 100 * time.Millisecond, 100 * time.Millisecond}} {
			for name, op := range hungOps(stores[i]) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := context.Background()
					if bound.deadline > 0 {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, bound.deadline)
						defer cancel()
					}
					start := time.Now()
					err := op(ctx)
					took := time.Since(start)
					t.Logf("%s, %s: %s returned after %v", v.name, bound.name, name, took.Round(time.Millisecond))
					if !errors.Is(err, store.ErrUnavailable) {
						t.Errorf("%s, %s: %s: %v, want ErrUnavailable", v.name, bound.name, name, err)
					}
					if took > 3*bound.want+time.Second {
						t.Errorf("%s, %s: %s took %v, bound %v", v.name, bound.name, name, took, bound.want)
					}
				}()
			}
		}
	}
	wg.Wait()
}
