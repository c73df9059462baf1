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

// partitionStore wraps a store and, while down, fails Extend and Release
// as a network partition does: with ErrUnavailable. It logs when each
// Release reached it.
type partitionStore struct {
	contract.Forward
	mu       sync.Mutex
	down     bool
	releases []time.Time
}

func (p *partitionStore) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

func (p *partitionStore) isDown() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down
}

func (p *partitionStore) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	if p.isDown() {
		return time.Time{}, store.Unavailable("extend", errors.New("network partition"))
	}
	return p.Store.Extend(ctx, req)
}

func (p *partitionStore) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	p.mu.Lock()
	p.releases = append(p.releases, time.Now())
	down := p.down
	p.mu.Unlock()
	if down {
		return store.ReleaseResult{}, store.Unavailable("release", errors.New("network partition"))
	}
	return p.Store.Release(ctx, req)
}

func (p *partitionStore) releaseLog() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.releases...)
}

func newPartitionClient(t *testing.T, opts ...sluice.Option) (*sluice.Client, *partitionStore) {
	t.Helper()
	ps := &partitionStore{Forward: contract.Forward{Store: memstore.New()}}
	c, err := sluice.New(ps, opts...)
	if err != nil {
		t.Fatal(err)
	}
	putSeedBuckets(t, c)
	return c, ps
}

var errNotCancelled = errors.New("fn's context was not cancelled")

// When every renewal fails with a transient error, the callback's context
// is cancelled with ErrLeaseLost before the lease expires, by a margin of
// max(TTL/10, min(1s, TTL/4)): by then the reconciler cannot have
// reclaimed the slot, so no other holder can be running yet.
func TestWithSlotCancelsBeforeExpiryWhenRenewalsFail(t *testing.T) {
	tests := []struct {
		ttl  time.Duration
		want time.Duration // when fn's context is cancelled, after the grant
	}{
		{100 * time.Millisecond, 75 * time.Millisecond}, // margin TTL/4
		{3 * time.Second, 2250 * time.Millisecond},      // margin TTL/4
		{10 * time.Second, 9 * time.Second},             // margin 1s
		{60 * time.Second, 54 * time.Second},            // margin TTL/10
	}
	for _, tt := range tests {
		t.Run(tt.ttl.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, ps := newPartitionClient(t, config(leaseTTL(tt.ttl)))
				ps.setDown(true)
				var got time.Duration
				var reclaimed int
				err := c.WithSlot(context.Background(), "elevenlabs#concurrent", func(ctx context.Context, l *sluice.Lease) error {
					start := l.CreatedAt()
					select {
					case <-ctx.Done():
					case <-time.After(2 * tt.ttl):
						return errNotCancelled
					}
					got = time.Since(start)
					// A reconciler running now must find nothing to reclaim.
					res, err := ps.Store.Reconcile(context.Background(), store.ReconcileRequest{Now: time.Now(), Limit: store.DefaultReconcileLimit})
					if err != nil {
						return err
					}
					reclaimed = res.Reclaimed
					return context.Cause(ctx)
				})
				if !errors.Is(err, sluice.ErrLeaseLost) {
					t.Fatalf("WithSlot = %v, want ErrLeaseLost", err)
				}
				if got != tt.want {
					t.Errorf("fn cancelled %s after the grant, want %s", got, tt.want)
				}
				if reclaimed != 0 {
					t.Errorf("the reconciler reclaimed %d leases when fn was cancelled, want 0 (still unexpired)", reclaimed)
				}
				// The store is still down: the release is retried in the
				// background until the lease expires.
				time.Sleep(tt.ttl)
			})
		})
	}
}

// A renewal that fails once and then succeeds keeps the lease: a transient
// error alone does not cancel the callback.
func TestWithSlotSurvivesOneFailedRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, ps := newPartitionClient(t, config(leaseTTL(3*time.Second)))
		err := c.WithSlot(context.Background(), "elevenlabs#concurrent", func(ctx context.Context, l *sluice.Lease) error {
			ps.setDown(true)
			time.Sleep(1500 * time.Millisecond) // the renewal at 1s fails
			ps.setDown(false)
			time.Sleep(10 * time.Second) // the ones from 2s on succeed
			return context.Cause(ctx)
		})
		if err != nil {
			t.Fatalf("WithSlot = %v, want nil", err)
		}
	})
}

// A release that fails during an outage is retried in the background, so
// the slot comes back as soon as the store does, not after TTL + reconcile.
func TestWithSlotRetriesFailedRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, ps := newPartitionClient(t, config(leaseTTL(time.Minute)))
		var granted time.Time
		err := c.WithSlot(context.Background(), "elevenlabs#concurrent", func(ctx context.Context, l *sluice.Lease) error {
			granted = l.CreatedAt()
			ps.setDown(true)
			return nil
		})
		if !errors.Is(err, sluice.ErrUnavailable) {
			t.Fatalf("WithSlot = %v, want the release's ErrUnavailable", err)
		}
		if got, want := tokens(t, c, "elevenlabs#concurrent"), int64(1000); got != want {
			t.Fatalf("during the outage: %d millitokens, want %d (slot still held)", got, want)
		}
		time.Sleep(10 * time.Second)
		back := time.Now()
		ps.setDown(false)
		synctest.Wait()
		for i := 0; tokens(t, c, "elevenlabs#concurrent") != 2000; i++ {
			if time.Since(granted) >= time.Minute {
				t.Fatalf("the slot came back only at the lease's expiry")
			}
			time.Sleep(100 * time.Millisecond)
		}
		// Backoff is capped at 5 s: the slot is back within that of the store.
		if took := time.Since(back); took > 5*time.Second {
			t.Errorf("slot back %s after the store, want at most 5s", took)
		}
		n := len(ps.releaseLog())
		time.Sleep(2 * time.Minute)
		if got := len(ps.releaseLog()); got != n {
			t.Errorf("%d releases after the successful one, want none", got-n)
		}
	})
}

// While the store stays down, the retries stop at the lease's expiry: the
// background goroutine never outlives the lease (synctest.Test would hang
// on a goroutine that did).
func TestWithSlotReleaseRetriesStopAtExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, ps := newPartitionClient(t, config(leaseTTL(30*time.Second)))
		var expiry time.Time
		err := c.WithSlot(context.Background(), "elevenlabs#concurrent", func(ctx context.Context, l *sluice.Lease) error {
			expiry = l.CreatedAt().Add(l.TTL())
			ps.setDown(true)
			return nil
		})
		if !errors.Is(err, sluice.ErrUnavailable) {
			t.Fatalf("WithSlot = %v, want ErrUnavailable", err)
		}
		time.Sleep(time.Hour)
		log := ps.releaseLog()
		if len(log) < 3 {
			t.Fatalf("%d release attempts, want the first and retries", len(log))
		}
		if last := log[len(log)-1]; !last.Before(expiry) {
			t.Errorf("last release attempt at %s, after the lease's expiry %s", last, expiry)
		}
	})
}

// A release that finds no record (the reconciler reclaimed the lease) is
// final: it is not retried.
func TestSlotReleaseOfReclaimedLeaseNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, ps := newPartitionClient(t, config(leaseTTL(time.Minute)))
		h, err := c.Slot(context.Background(), "elevenlabs#concurrent")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ps.Store.Reconcile(context.Background(), store.ReconcileRequest{Now: time.Now().Add(time.Hour), Limit: store.DefaultReconcileLimit}); err != nil {
			t.Fatal(err)
		}
		if err := h.Release(context.Background()); !errors.Is(err, sluice.ErrLeaseExpired) {
			t.Fatalf("Release = %v, want ErrLeaseExpired", err)
		}
		time.Sleep(2 * time.Minute)
		if got := len(ps.releaseLog()); got != 1 {
			t.Errorf("%d releases, want 1", got)
		}
	})
}

// stuckAdjustStore's Adjust blocks, ignoring its context, until release is
// closed: an operation stuck in the store while it holds the lease.
type stuckAdjustStore struct {
	contract.Forward
	entered, release chan struct{}
}

func (s *stuckAdjustStore) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	close(s.entered)
	<-s.release
	return store.Settlement{}, store.Unavailable("adjust", errors.New("stuck"))
}

// An operation stuck on the lease (here an Adjust, with no OpTimeout)
// blocks the renewals too, on the lease's lock; the lease is still given
// up. (Real time, not synctest: a goroutine waiting on a mutex does not let
// a bubble's clock advance. Nothing is asserted about durations.)
func TestWithSlotLossNotDelayedByStuckOperation(t *testing.T) {
	ss := &stuckAdjustStore{Forward: contract.Forward{Store: memstore.New()}, entered: make(chan struct{}), release: make(chan struct{})}
	c, err := sluice.New(ss, config(leaseTTL(60*time.Millisecond), opTimeout(0)))
	if err != nil {
		t.Fatal(err)
	}
	putSeedBuckets(t, c)
	err = c.WithSlot(context.Background(), "openai#tpm", func(ctx context.Context, l *sluice.Lease) error {
		go func() { _, _ = l.Adjust(context.Background(), "openai#tpm", 1) }()
		<-ss.entered
		defer close(ss.release)
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
			return errNotCancelled
		}
		return context.Cause(ctx)
	}, sluice.WithCost(10), sluice.WithRecord())
	if !errors.Is(err, sluice.ErrLeaseLost) {
		t.Fatalf("WithSlot = %v, want ErrLeaseLost", err)
	}
}
