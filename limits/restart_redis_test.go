package limits_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/limits"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/redisstore"
)

// redisHandle opens a store on srv with its own connections, as another
// process of the fleet would.
func redisHandle(t *testing.T, srv *redistest.Server) store.Store {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	st, err := redisstore.New(rdb, redisstore.WithCallerClock())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestRedisRestartedEmpty: a redis-server without persistence restarts (or
// is flushed) under a fleet of four replicas built with limits.NewClient.
// A client that only applied the file at start-up fails every call with
// an unknown dimension; the replicas re-create each lost bucket, exactly
// one of them per bucket, and serve the calls. The clock is fixed, so the
// grants are exact: none from the rate bucket, which comes back empty (the
// fleet spent its tokens before the loss), and exactly the capacity from
// the concurrent one, which comes back full (its holders' leases were lost
// with it) and which no replica refills once another re-created it.
func TestRedisRestartedEmpty(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := parse(t, raceFile)
	// The grants after the loss: fleet#rpm (9/min) comes back empty.
	caps := map[string]int64{"fleet#rpm": 0, "fleet#concurrent": 4}
	tests := []struct {
		name string
		lose func(*redistest.Server) error
	}{
		{"restart without persistence", func(s *redistest.Server) error {
			if err := s.Kill(); err != nil {
				return err
			}
			return s.Restart()
		}},
		{"flushall", func(s *redistest.Server) error { _, err := s.Do("FLUSHALL"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.New(t)
			var recreated atomic.Int64
			obs := &sluice.Observer{Recreated: func(context.Context, sluice.RecreateEvent) { recreated.Add(1) }}
			var replicas []*sluice.Client
			cfg := sluice.DefaultConfig()
			cfg.OpTimeout = 10 * time.Second
			for range 4 {
				c, err := limits.NewClient(ctx, redisHandle(t, srv), f, sluice.WithClock(fixedClock{at}),
					sluice.WithObserver(obs), sluice.WithConfig(cfg))
				if err != nil {
					t.Fatal(err)
				}
				replicas = append(replicas, c)
			}
			plain, err := sluice.New(redisHandle(t, srv), sluice.WithClock(fixedClock{at}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := limits.Apply(ctx, plain, f); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if r, err := replicas[0].Acquire(ctx, "fleet#rpm"); err != nil || r.Outcome != sluice.Granted {
					t.Fatalf("before the restart: %+v, %v", r, err)
				}
			}
			if err := tt.lose(srv); err != nil {
				t.Fatal(err)
			}
			// Without the file's buckets, every call fails until someone
			// applies the limits again.
			if _, err := plain.Acquire(ctx, "fleet#rpm"); !errors.Is(err, sluice.ErrUnknownDimension) {
				t.Fatalf("a client without declared buckets: %v, want ErrUnknownDimension", err)
			}
			granted := map[string]*atomic.Int64{"fleet#rpm": {}, "fleet#concurrent": {}}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := range 32 {
				dim := []string{"fleet#rpm", "fleet#concurrent"}[g%2]
				wg.Go(func() {
					<-start
					for range 2 {
						r, err := replicas[g%4].Acquire(ctx, dim)
						if err != nil {
							t.Errorf("goroutine %d: %v", g, err)
							return
						}
						if r.Outcome == sluice.Granted {
							granted[dim].Add(1)
						}
					}
				})
			}
			began := time.Now()
			close(start)
			wg.Wait()
			t.Logf("64 calls from 4 replicas after the loss answered in %s", time.Since(began).Round(time.Millisecond))
			for dim, want := range caps {
				if got := granted[dim].Load(); got != want {
					t.Errorf("%s: %d grants after the loss with a fixed clock, want %d", dim, got, want)
				}
			}
			if n := recreated.Load(); n != 2 {
				t.Errorf("%d re-creations counted across 4 replicas, want 2 (one per lost bucket)", n)
			}
			if _, err := replicas[1].Acquire(ctx, "fleet#rpd"); !errors.Is(err, sluice.ErrUnknownDimension) {
				t.Errorf("an undeclared dimension: %v, want ErrUnknownDimension", err)
			}
		})
	}
}

// TestStartWhileRedisDown: with fail-open a replica starts while the store
// is down, grants degraded meanwhile, and works on the real store once it
// is up, the limits applied in the background; failing closed, it does
// not start.
func TestStartWhileRedisDown(t *testing.T) {
	f := parse(t, raceFile)
	t.Run("fail closed", func(t *testing.T) {
		srv := redistest.New(t)
		_ = srv.Kill()
		cfg := sluice.DefaultConfig()
		cfg.OpTimeout = time.Second
		_, err := limits.NewClient(context.Background(), redisHandle(t, srv), f, sluice.WithConfig(cfg))
		if !errors.Is(err, sluice.ErrUnavailable) {
			t.Fatalf("NewClient = %v, want ErrUnavailable", err)
		}
	})
	t.Run("fail open", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv := redistest.New(t)
		st := redisHandle(t, srv)
		_ = srv.Kill()
		cfg := sluice.DefaultConfig()
		cfg.FailurePolicy, cfg.OpTimeout = sluice.FailOpen, time.Second
		c, err := limits.NewClient(ctx, st, f, sluice.WithConfig(cfg))
		if err != nil {
			t.Fatalf("NewClient with the store down: %v", err)
		}
		r, err := c.Acquire(ctx, "fleet#rpm")
		if err != nil || !r.Degraded {
			t.Fatalf("while down: %+v, %v; want a degraded grant", r, err)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		// The background apply retries after about a second, doubling.
		deadline := time.Now().Add(30 * time.Second)
		for {
			bs, err := c.Buckets(ctx)
			if err == nil && len(bs) == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the limits were not applied within 30 s of the store's return: %+v, %v", bs, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		r, err = c.Acquire(ctx, "fleet#rpm")
		if err != nil || r.Outcome != sluice.Granted || r.Degraded {
			t.Fatalf("once up: %+v, %v; want a grant from the store", r, err)
		}
	})
}
