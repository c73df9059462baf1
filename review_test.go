package sluice_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// A degraded (fail-open) grant charged nothing; settling it once the store
// is back must charge the actual cost in full and never refund.
func TestSettleDegradedLeaseChargesActual(t *testing.T) {
	ctx := context.Background()
	fs := &faultStore{Forward: contract.Forward{Store: memstore.New()}, err: store.Unavailable("acquire", errors.New("down")), n: 1}
	clk := &manualClock{t: t0} // a fixed clock: no refill between the steps
	c, err := sluice.New(fs, config(failOpen), sluice.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	putSeedBuckets(t, c)
	res, err := c.Acquire(ctx, "openai#tpm", sluice.WithCost(5000))
	if err != nil || !res.Degraded {
		t.Fatalf("acquire = %+v, %v; want a degraded grant", res, err)
	}
	if _, err := res.Lease.Settle(ctx, "openai#tpm", 100); err != nil {
		t.Fatal(err)
	}
	if got, want := tokens(t, c, "openai#tpm"), int64(9_900_000); got != want {
		t.Fatalf("after settling a degraded 5000 estimate to 100: %d, want %d (100 charged, nothing refunded)", got, want)
	}
	if _, err := res.Lease.Settle(ctx, "openai#tpm", 300); err != nil {
		t.Fatal(err)
	}
	if got, want := tokens(t, c, "openai#tpm"), int64(9_700_000); got != want {
		t.Fatalf("after settling again to 300: %d, want %d", got, want)
	}
}

// cancelStore cancels the caller's context during Acquire and then fails
// the way a store reports a context error: as unavailable.
type cancelStore struct {
	contract.Forward
	cancel context.CancelFunc
}

func (s cancelStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	s.cancel()
	return store.Unavailable("acquire", ctx.Err())
}

// A caller's own cancellation or deadline is never turned into a degraded
// grant, even under FailOpen.
func TestFailOpenDoesNotGrantOnCallerCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c, err := sluice.New(cancelStore{contract.Forward{Store: memstore.New()}, cancel}, config(failOpen))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Acquire(ctx, "openai#rpm")
	if !errors.Is(err, context.Canceled) || res.Granted() {
		t.Fatalf("acquire = %+v, %v; want context.Canceled and no grant", res, err)
	}
}

// skewStore is a store whose clock runs an hour ahead of the client's, and
// which records the TTL of every Extend.
type skewStore struct {
	contract.Forward
	mu   sync.Mutex
	ttls []time.Duration
}

const skew = time.Hour

func (s *skewStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	err := s.Store.Acquire(ctx, req, res)
	res.ExpiresAt = res.ExpiresAt.Add(skew)
	return err
}

func (s *skewStore) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	s.mu.Lock()
	s.ttls = append(s.ttls, req.TTL)
	s.mu.Unlock()
	exp, err := s.Store.Extend(ctx, req)
	return exp.Add(skew), err
}

// Renewal uses the granted TTL, not ExpiresAt-CreatedAt, which mixes the
// store's clock with the client's.
func TestRenewalIgnoresStoreClockSkew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ss := &skewStore{Forward: contract.Forward{Store: memstore.New()}}
		c, err := sluice.New(ss, config(leaseTTL(3*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		putSeedBuckets(t, c)
		err = c.WithSlot(context.Background(), "elevenlabs#concurrent", func(ctx context.Context, l *sluice.Lease) error {
			time.Sleep(10*time.Second + 500*time.Millisecond)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if len(ss.ttls) != 10 {
			t.Errorf("renewals over 10.5 s with a 3 s TTL = %d, want 10 (one per second)", len(ss.ttls))
		}
		for _, ttl := range ss.ttls {
			if ttl != 3*time.Second {
				t.Fatalf("renewed with TTL %s, want the granted 3s", ttl)
			}
		}
	})
}

// hangStore's Extend blocks until its context is done.
type hangStore struct{ contract.Forward }

func (hangStore) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	<-ctx.Done()
	return time.Time{}, store.Unavailable("extend", ctx.Err())
}

// A renewal stuck in the store never keeps WithSlot from returning.
func TestReleaseDoesNotWaitForStuckRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := sluice.New(hangStore{contract.Forward{Store: memstore.New()}}, config(leaseTTL(30*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		putSeedBuckets(t, c)
		start := time.Now()
		err = c.WithSlot(context.Background(), "elevenlabs#concurrent", func(ctx context.Context, l *sluice.Lease) error {
			time.Sleep(10*time.Second + time.Second) // the renewal at +10s is now stuck
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 11*time.Second {
			t.Errorf("WithSlot took %s, want 11s: Release must not wait for the stuck renewal", took)
		}
		if got, want := tokens(t, c, "elevenlabs#concurrent"), int64(2000); got != want {
			t.Errorf("balance = %d, want %d (released)", got, want)
		}
	})
}
