package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/store"
)

// TestOutage stops a private redis-server mid-run (killed, then hung):
// every operation fails with an error matching store.ErrUnavailable within
// the configured timeout, and after a restart the store works again.
func TestOutage(t *testing.T) { outage(t, false) }

// TestOutageBatched: the same with batching, and concurrent acquisitions
// (pipelined) failing together.
func TestOutageBatched(t *testing.T) { outage(t, true) }

func outage(t *testing.T, batched bool) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	const timeout = 300 * time.Millisecond
	opts := []Option{WithTimeout(timeout), WithBatching(1)}
	if batched {
		opts = append(opts, WithBatching(64))
	}
	s := newStoreOn(t, c, opts...)
	ctx := context.Background()
	b := store.Bucket{Name: "o#rpm", Config: bucket.PerPeriod(bucket.Requests, 1000, time.Minute)}
	put(t, s, t0, b)
	acquire(t, s, t0, store.Item{Dimension: "o#rpm"})

	unavailable := func(phase string) {
		t.Helper()
		ops := map[string]func() error{
			"acquire": func() error {
				var res store.AcquireResult
				return s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "o#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
			},
			"release": func() error {
				_, err := s.Release(ctx, store.ReleaseRequest{Now: t0, ID: store.NewLeaseID()})
				return err
			},
			"peek": func() error {
				_, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"o#rpm"}})
				return err
			},
			"reconcile": func() error {
				_, err := s.Reconcile(ctx, store.ReconcileRequest{Now: t0, Limit: store.DefaultReconcileLimit})
				return err
			},
			"put": func() error { return s.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: b}) },
		}
		if batched {
			ops["8 concurrent acquires"] = func() error {
				errs := make(chan error, 8)
				for range 8 {
					go func() {
						var res store.AcquireResult
						errs <- s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "o#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
					}()
				}
				var err error
				for range 8 {
					if e := <-errs; !errors.Is(e, store.ErrUnavailable) {
						err = e
					} else if err == nil {
						err = e
					}
				}
				return err
			}
		}
		for name, op := range ops {
			start := time.Now()
			err := op()
			took := time.Since(start)
			t.Logf("%s: %s returned after %v", phase, name, took.Round(time.Millisecond))
			if !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("%s: %s: %v, want ErrUnavailable", phase, name, err)
			}
			// Loose bound: the store's timeout plus scheduling slack on a
			// loaded machine; an unbounded hang is what this catches.
			if took > timeout+2*time.Second {
				t.Errorf("%s: %s took %v with a %v timeout", phase, name, took, timeout)
			}
		}
	}

	_ = srv.Kill() // killed: connections refused
	unavailable("server killed")

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The restarted server is empty (no persistence in tests): the bucket
	// is gone and the scripts are not cached; both recover transparently.
	var res store.AcquireResult
	err = s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "o#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
	if !errors.Is(err, store.ErrUnknownDimension) {
		t.Fatalf("after restart, before re-creating the bucket: %v", err)
	}
	put(t, s, t0, b)
	if r := acquire(t, s, t0, store.Item{Dimension: "o#rpm"}); !r.Granted {
		t.Fatalf("after restart: %+v", r)
	}

	if err := srv.Stop(); err != nil { // hung: connections open, no answers
		t.Fatal(err)
	}
	unavailable("server hung")
	if err := srv.Cont(); err != nil {
		t.Fatal(err)
	}
	if r := acquire(t, s, t0, store.Item{Dimension: "o#rpm"}); !r.Granted {
		t.Fatalf("after resume: %+v", r)
	}
}

// TestOutOfMemory fills a private redis-server past its maxmemory, with
// the noeviction policy the docs recommend: Redis refuses every write, and
// the store must call that an outage (store.ErrUnavailable, so that the
// failure policy applies), not an error of the request.
func TestOutOfMemory(t *testing.T) {
	srv, err := redistest.Start("--maxmemory-policy", "noeviction")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	s := newStoreOn(t, c)
	ctx := context.Background()
	put(t, s, t0, store.Bucket{Name: "m#rpm", Config: bucket.PerPeriod(bucket.Requests, 1000, time.Minute)})
	if _, err := srv.Do("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	var res store.AcquireResult
	err = s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "m#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute, Record: true}, &res)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("acquire on a full Redis: %v, want store.ErrUnavailable", err)
	}
}
