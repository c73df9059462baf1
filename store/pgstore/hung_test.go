package pgstore

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
)

// ownServer starts a PostgreSQL of the test's own, which the test may stop,
// freeze or kill; it is stopped when the test ends.
func ownServer(t *testing.T) *pgtest.Server {
	t.Helper()
	pgtest.SkipShort(t)
	srv, err := pgtest.Start()
	if err != nil {
		t.Fatalf("a PostgreSQL of its own is required: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// storeOps returns every operation of s (and Migrate, MigrateReport,
// Version, Ping) as a call that returns only its error. held is a lease
// granted before, on the concurrent bucket "c" (the requests bucket "r"
// exists too).
func storeOps(s *Store, held store.LeaseID) map[string]func(context.Context) error {
	items := []store.Item{{Dimension: "r", Cost: 1}}
	return map[string]func(context.Context) error{
		"acquire": func(ctx context.Context) error {
			var res store.AcquireResult
			return s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: items, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
		},
		"release": func(ctx context.Context) error {
			_, err := s.Release(ctx, store.ReleaseRequest{Now: t0, ID: held})
			return err
		},
		"extend": func(ctx context.Context) error {
			_, err := s.Extend(ctx, store.ExtendRequest{Now: t0, ID: held, TTL: time.Minute})
			return err
		},
		"adjust": func(ctx context.Context) error {
			_, err := s.Adjust(ctx, store.AdjustRequest{Now: t0, Dimension: "r", Delta: 1, ID: store.NewLeaseID(), Held: 1})
			return err
		},
		"penalize": func(ctx context.Context) error {
			_, err := s.Penalize(ctx, store.PenalizeRequest{Now: t0, Dimension: "r", FactorMilli: 500})
			return err
		},
		"cooldown": func(ctx context.Context) error {
			_, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: "r", Until: t0.Add(time.Second)})
			return err
		},
		"sync": func(ctx context.Context) error {
			_, err := s.Sync(ctx, store.SyncRequest{Now: t0, Dimension: "r", Remaining: 1})
			return err
		},
		"peek": func(ctx context.Context) error {
			_, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"r"}})
			return err
		},
		"list buckets": func(ctx context.Context) error {
			_, err := s.ListBuckets(ctx, store.ListBucketsRequest{Now: t0})
			return err
		},
		"leases": func(ctx context.Context) error {
			_, err := s.Leases(ctx, store.LeaseQuery{Now: t0})
			return err
		},
		"put bucket": func(ctx context.Context) error {
			return s.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: store.Bucket{Name: "r2", Config: bucket.ConcurrentSlots(1)}})
		},
		"delete bucket": func(ctx context.Context) error { return s.DeleteBucket(ctx, store.DeleteBucketRequest{Name: "r"}) },
		"reconcile": func(ctx context.Context) error {
			_, err := s.Reconcile(ctx, store.ReconcileRequest{Now: t0, Limit: store.DefaultReconcileLimit})
			return err
		},
		"migrate": s.Migrate,
		"migrate report": func(ctx context.Context) error {
			_, _, err := s.MigrateReport(ctx)
			return err
		},
		"version": func(ctx context.Context) error {
			_, err := s.Version(ctx)
			return err
		},
		"ping": s.Ping,
	}
}

// runBounded runs every op at once and checks that each fails with
// store.ErrUnavailable, and returns within 3× bound plus a second (a
// sanity limit for a loaded machine: the elapsed times are logged, not
// asserted tightly).
func runBounded(t *testing.T, ops map[string]func(context.Context) error, ctx context.Context, bound time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	for name, op := range ops {
		wg.Go(func() {
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- op(ctx) }()
			select {
			case err := <-done:
				el := time.Since(start)
				if !errors.Is(err, store.ErrUnavailable) {
					t.Errorf("%s on a hung server: %v, want ErrUnavailable", name, err)
				}
				t.Logf("%s: ErrUnavailable after %v (bound %v)", name, el.Round(time.Millisecond), bound)
			case <-time.After(3*bound + time.Second):
				t.Errorf("%s on a hung server did not return within 3×%v + 1s", name, bound)
			}
		})
	}
	wg.Wait()
}

// TestHungServer freezes the server with SIGSTOP (the kernel still accepts
// connections; nothing answers): every operation, the migrations included,
// returns store.ErrUnavailable by the store's timeout or the caller's
// deadline, whichever comes first, whatever the pool's configuration
// (no connect timeout, a pool smaller than the number of callers). After
// SIGCONT the same pool serves every operation again.
func TestHungServer(t *testing.T) {
	srv := ownServer(t)
	pools := map[string]*pgxpool.Pool{
		"default pool":  pgtest.PoolAt(t, srv.URL, nil),
		"one-conn pool": pgtest.PoolAt(t, srv.URL, func(c *pgxpool.Config) { c.MaxConns = 1 }),
	}
	ctx := context.Background()
	const timeout = 500 * time.Millisecond
	type fixture struct {
		s    *Store
		held store.LeaseID
	}
	fixtures := map[string]fixture{}
	for name, pool := range pools {
		setup := newStoreOn(t, pool, WithCallerClock())
		put(t, setup, store.Bucket{Name: "r", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)})
		put(t, setup, store.Bucket{Name: "c", Config: bucket.ConcurrentSlots(5)})
		held := store.NewLeaseID()
		var res store.AcquireResult
		if err := setup.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "c"}}, ID: held, TTL: time.Hour}, &res); err != nil || !res.Granted {
			t.Fatalf("acquire: %v %+v", err, res)
		}
		fixtures[name] = fixture{reopen(t, setup, WithTimeout(timeout)), held}
	}
	defaultStore, err := New(pools["default pool"], WithSchema(fixtures["default pool"].s.Schema()))
	if err != nil {
		t.Fatal(err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	for name, f := range fixtures {
		t.Run(name+"/store timeout", func(t *testing.T) {
			runBounded(t, storeOps(f.s, f.held), ctx, timeout)
		})
	}
	t.Run("caller deadline first", func(t *testing.T) {
		f := fixtures["default pool"]
		dctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		runBounded(t, storeOps(f.s, f.held), dctx, 150*time.Millisecond)
	})
	t.Run("default timeout", func(t *testing.T) {
		ops := storeOps(defaultStore, fixtures["default pool"].held)
		runBounded(t, map[string]func(context.Context) error{"acquire": ops["acquire"], "migrate": ops["migrate"]}, ctx, DefaultTimeout)
	})
	if err := srv.Cont(); err != nil {
		t.Fatal(err)
	}
	t.Logf("server frozen for %v", time.Since(paused).Round(time.Millisecond))

	// Connections abandoned at the deadline are closed in the background
	// (pgx sends a cancel request and waits for it, for at most 15 s); the
	// pool then dials fresh ones. Every slot of each pool must serve again.
	resumed := time.Now()
	for name, f := range fixtures {
		pool := pools[name]
		n := int(pool.Config().MaxConns)
		for {
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for range n {
				wg.Go(func() { errs <- f.s.Ping(ctx) })
			}
			wg.Wait()
			close(errs)
			var failed error
			for err := range errs {
				if err != nil {
					failed = err
				}
			}
			if failed == nil {
				break
			}
			if time.Since(resumed) > 30*time.Second {
				t.Fatalf("%s: not serving 30 s after SIGCONT: %v (pool %+v)", name, failed, pool.Stat())
			}
			time.Sleep(50 * time.Millisecond) // polling for recovery
		}
		t.Logf("%s: all %d connections serve again %v after SIGCONT", name, n, time.Since(resumed).Round(time.Millisecond))
		if _, err := reopen(t, f.s, WithTimeout(testTimeout)).Release(ctx, store.ReleaseRequest{Now: t0, ID: f.held}); err != nil {
			t.Fatalf("%s: release after SIGCONT: %v", name, err)
		}
	}
}

// TestHungServerLong freezes the server for 20 s, longer than the 15 s pgx
// gives the cancel request of a connection abandoned at a deadline: calls
// that abandon every pooled connection end with ErrUnavailable at the
// timeout, and then, with the server still frozen, the pool's slots come
// back (connections are not stuck forever); after SIGCONT the pool serves
// again. It takes about 25 s, so it runs only with SLUICE_LONG=1.
func TestHungServerLong(t *testing.T) {
	if os.Getenv("SLUICE_LONG") == "" {
		t.Skip("SLUICE_LONG=1 runs it (about 25 s)")
	}
	srv := ownServer(t)
	pool := pgtest.PoolAt(t, srv.URL, func(c *pgxpool.Config) { c.MaxConns = 2 })
	s := reopen(t, newStoreOn(t, pool), WithTimeout(500*time.Millisecond))
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 2 { // two pooled connections, idle
		wg.Go(func() {
			if err := s.Ping(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	for range 2 { // both abandoned at the deadline
		wg.Go(func() {
			if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("ping on a frozen server: %v, want ErrUnavailable", err)
			}
		})
	}
	wg.Wait()
	t.Logf("after the timeouts: %d connections in the pool (%d idle)", pool.Stat().TotalConns(), pool.Stat().IdleConns())
	var freed time.Duration
	for time.Since(paused) < 20*time.Second {
		if pool.Stat().TotalConns() == 0 {
			freed = time.Since(paused)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if freed == 0 {
		t.Errorf("pool slots still taken after 20 s of freeze: %d connections", pool.Stat().TotalConns())
	} else {
		t.Logf("every pool slot free again %v into the freeze", freed.Round(time.Millisecond))
	}
	start := time.Now()
	if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("ping on a frozen server: %v, want ErrUnavailable", err)
	}
	t.Logf("a call after that: ErrUnavailable after %v", time.Since(start).Round(time.Millisecond))
	if err := srv.Cont(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	for s.Ping(ctx) != nil {
		if time.Since(resumed) > 30*time.Second {
			t.Fatal("not serving 30 s after SIGCONT")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("serving again %v after SIGCONT", time.Since(resumed).Round(time.Millisecond))
}
