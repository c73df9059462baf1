package sluice_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// newBubbleClient returns a client on the bubble's virtual wall clock.
func newBubbleClient(t *testing.T, opts ...sluice.Option) (*sluice.Client, *memstore.Store) {
	st := memstore.New()
	c, err := sluice.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	putSeedBuckets(t, c)
	return c, st
}

func TestWithSlotWaitsOutRetryIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, _ := newBubbleClient(t)
		if _, err := c.Acquire(ctx, "openai#rpm", sluice.WithCost(100)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ran := false
		err := c.WithSlot(within(ctx, t, 5*time.Second), "openai#rpm", func(ctx context.Context, l *sluice.Lease) error {
			ran = true
			return nil
		})
		if err != nil || !ran {
			t.Fatalf("WithSlot = %v, ran %v", err, ran)
		}
		// One token takes 600 ms at 100/min; jitter adds at most 60 ms.
		if waited := time.Since(start); waited < 600*time.Millisecond || waited > 660*time.Millisecond {
			t.Errorf("waited %v, want between 600ms and 660ms", waited)
		}
	})
}

func TestWithSlotTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, _ := newBubbleClient(t)
		if _, err := c.Acquire(ctx, "openai#tpm", sluice.WithCost(10_000)); err != nil {
			t.Fatal(err)
		}
		err := c.WithSlot(within(ctx, t, 2*time.Second), "openai#tpm", func(context.Context, *sluice.Lease) error {
			t.Error("fn ran without a slot")
			return nil
		}, sluice.WithCost(5_000))
		var te *sluice.SlotTimeoutError
		if !errors.As(err, &te) || !errors.Is(err, sluice.ErrSlotTimeout) {
			t.Fatalf("WithSlot = %v, want a SlotTimeoutError", err)
		}
		if te.Dimensions[0] != "openai#tpm" || te.Timeout != 2*time.Second {
			t.Errorf("SlotTimeoutError = %+v", te)
		}
	})
}

func TestWithSlotRenewsAndReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newBubbleClient(t, config(leaseTTL(3*time.Second)))
		err := c.WithSlot(ctx, "elevenlabs#concurrent", func(ctx context.Context, l *sluice.Lease) error {
			// Hold for 10 TTLs; renewal must keep the lease alive through reconciles.
			for i := 0; i < 10; i++ {
				time.Sleep(3 * time.Second)
				if _, err := st.Reconcile(context.Background(), store.ReconcileRequest{Now: time.Now(), Limit: store.DefaultReconcileLimit}); err != nil {
					return err
				}
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("WithSlot across renewals = %v", err)
		}
		if got, want := tokens(t, c, "elevenlabs#concurrent"), int64(2000); got != want {
			t.Errorf("after WithSlot: %d millitokens, want %d (released)", got, want)
		}
	})
}

func TestWithSlotLeaseLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newBubbleClient(t, config(leaseTTL(3*time.Second)))
		var cause atomic.Value
		err := c.WithSlot(ctx, "elevenlabs#concurrent", func(fctx context.Context, l *sluice.Lease) error {
			// Someone deletes every lease record (as a reconciler with a
			// skewed clock would): the next renewal must notice.
			if _, err := st.Reconcile(ctx, store.ReconcileRequest{Now: time.Now().Add(time.Hour), Limit: store.DefaultReconcileLimit}); err != nil {
				return err
			}
			<-fctx.Done()
			cause.Store(context.Cause(fctx))
			return context.Cause(fctx)
		})
		if !errors.Is(err, sluice.ErrLeaseLost) {
			t.Fatalf("WithSlot = %v, want ErrLeaseLost", err)
		}
		if got := cause.Load(); got != sluice.ErrLeaseLost {
			t.Errorf("fn's context cause = %v, want ErrLeaseLost", got)
		}
		if got, want := tokens(t, c, "elevenlabs#concurrent"), int64(2000); got != want {
			t.Errorf("balance = %d, want %d (restored once, by the reconciler)", got, want)
		}
	})
}

func TestWithSlotReleasesOnPanic(t *testing.T) {
	ctx := context.Background()
	c, _, _ := newClient(t)
	func() {
		defer func() { _ = recover() }()
		_ = c.WithSlot(ctx, "elevenlabs#concurrent", func(context.Context, *sluice.Lease) error { panic("boom") })
	}()
	if got, want := tokens(t, c, "elevenlabs#concurrent"), int64(2000); got != want {
		t.Errorf("after a panicking fn: %d millitokens, want %d", got, want)
	}
}

func TestContentionRetriesThenRetryIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fs := &faultStore{Forward: contract.Forward{Store: memstore.New()}, err: store.ErrContention, n: 2}
		c, err := sluice.New(fs, config(func(c *sluice.Config) { c.MaxRetries = 3 }))
		if err != nil {
			t.Fatal(err)
		}
		putSeedBuckets(t, c)
		res, err := c.Acquire(ctx, "openai#rpm")
		if err != nil || !res.Granted() || fs.calls != 3 {
			t.Fatalf("after 2 contentions: %v, %v, %d calls; want granted on call 3", res.Outcome, err, fs.calls)
		}
		fs.n, fs.calls = 10, 0
		start := time.Now()
		res, err = c.Acquire(ctx, "openai#rpm")
		if err != nil || res.Outcome != sluice.RetryIn || fs.calls != 4 {
			t.Fatalf("persistent contention: %v, %v, %d calls; want RETRY_IN after 4 calls", res.Outcome, err, fs.calls)
		}
		// Backoffs of 25, 50, 100 ms with equal jitter: 87.5 to 175 ms.
		if waited := time.Since(start); waited < 87*time.Millisecond || waited > 175*time.Millisecond {
			t.Errorf("backed off %v, want 87.5ms..175ms", waited)
		}
		if res.RetryIn < 100*time.Millisecond || res.RetryIn > 200*time.Millisecond {
			t.Errorf("RetryIn = %v, want the next backoff (100..200ms)", res.RetryIn)
		}
	})
}
