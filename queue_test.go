package sluice_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/slotload"
	"github.com/ontopix/sluice/store/memstore"
)

// newSlotsClient returns a client over a fresh memstore (counted) with the
// concurrent dimension "load#concurrent" of slots slots.
func newSlotsClient(t *testing.T, slots int64, opts ...sluice.Option) (*sluice.Client, *countingStore) {
	t.Helper()
	st := &countingStore{Store: memstore.New()}
	t.Cleanup(func() { st.Close() })
	c, err := sluice.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PutBucket(context.Background(), sluice.Bucket{Name: "load#concurrent", Config: sluice.ConcurrentLimit(slots)}); err != nil {
		t.Fatal(err)
	}
	return c, st
}

// Waiting in line keeps every slot busy: 16 workers on 8 slots, each
// holding its slot 20 ms or 1 s, use at least 95 % of the slot-time. The
// waiters a release concerns are woken at once, and a waiter is granted
// as soon as the free slots cover it and the tickets ahead of it.
func TestWaitInLineUsesTheSlots(t *testing.T) {
	for _, tc := range []struct {
		hold, window time.Duration
	}{
		{20 * time.Millisecond, 10 * time.Second},
		{time.Second, 60 * time.Second},
	} {
		t.Run(tc.hold.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, st := newSlotsClient(t, 8)
				res := slotload.Run(context.Background(), slotload.Config{
					Clients: []*sluice.Client{c}, Dimension: "load#concurrent", Slots: 8, Workers: 16,
					Hold: tc.hold, Window: tc.window,
				})
				if res.Errors > 0 {
					t.Fatalf("%d waits failed; first: %v", res.Errors, res.FirstErr)
				}
				t.Logf("hold %v: utilisation %.1f %%, %d grants, %.0f store calls/s",
					tc.hold, 100*res.Utilisation, res.Grants, float64(st.calls())/tc.window.Seconds())
				if res.Utilisation < 0.95 {
					t.Errorf("utilisation = %.1f %%, want at least 95 %%", 100*res.Utilisation)
				}
			})
		})
	}
}

// A caller that retries a fail-fast wait in a loop costs the store at
// most one call per re-ask interval: the client answers the timeouts it
// can predict from the store's last answer.
func TestFailFastLoopSparesTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newCountingClient(t)
		drain(t, c, "openai#tpm", 10_000)
		before := st.calls()
		timeouts := 0
		for start := time.Now(); time.Since(start) < time.Second; {
			_, err := c.Wait(ctx, []sluice.Request{{Dimension: "openai#tpm", Cost: 5_000}}, 100*time.Millisecond)
			if !errors.Is(err, sluice.ErrSlotTimeout) {
				t.Fatalf("Wait = %v, want a slot timeout", err)
			}
			timeouts++
			time.Sleep(time.Millisecond)
		}
		if got := st.calls() - before; got > 11 {
			t.Errorf("%d timeouts made %d store calls in 1s, want at most 11", timeouts, got)
		} else {
			t.Logf("%d timeouts made %d store calls in 1s", timeouts, got)
		}
	})
}

// The client's prediction does not hide a refund made elsewhere: the
// loop re-asks the store within the re-ask interval and is granted.
func TestFailFastLoopNoticesARefundElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newCountingClient(t)
		other, err := sluice.New(st)
		if err != nil {
			t.Fatal(err)
		}
		res, err := other.Acquire(ctx, "openai#tpm", sluice.WithCost(10_000))
		if err != nil || !res.Granted() {
			t.Fatal(res.Outcome, err)
		}
		start := time.Now()
		refundAt := 500 * time.Millisecond
		go func() {
			time.Sleep(refundAt)
			if _, err := res.Lease.Settle(ctx, "openai#tpm", 0); err != nil {
				t.Error(err)
			}
		}()
		for {
			l, err := c.Wait(ctx, []sluice.Request{{Dimension: "openai#tpm", Cost: 5_000}}, 100*time.Millisecond)
			if err == nil {
				_ = l.Release(ctx)
				break
			}
			if !errors.Is(err, sluice.ErrSlotTimeout) {
				t.Fatalf("Wait = %v, want a slot timeout", err)
			}
			time.Sleep(time.Millisecond)
		}
		if got, limit := time.Since(start), refundAt+102*time.Millisecond; got > limit {
			t.Errorf("granted %v after the start, want by %v: the refund at %v went unnoticed", got, limit, refundAt)
		}
	})
}
