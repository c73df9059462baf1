package sluice_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/internal/testing/slotload"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// newSlotsClient returns a client over a fresh memstore (counted) with the
// concurrent dimension "load#concurrent" of slots slots.
func newSlotsClient(t *testing.T, slots int64, opts ...sluice.Option) (*sluice.Client, *countingStore) {
	t.Helper()
	st := &countingStore{Forward: contract.Forward{Store: memstore.New()}}
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
			_, err := c.Wait(within(ctx, t, 100*time.Millisecond), []sluice.Request{{Dimension: "openai#tpm", Cost: 5_000}})
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
			l, err := c.Wait(within(ctx, t, 100*time.Millisecond), []sluice.Request{{Dimension: "openai#tpm", Cost: 5_000}})
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

// A dead waiter's ticket at the head of the queue (its process crashed
// or was cut off) holds back its own cost only: a live waiter behind it is
// granted a free slot at once, not when the dead ticket expires.
func TestDeadTicketHoldsBackOnlyItsCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newSlotsClient(t, 2)
		var held []*sluice.Lease
		for range 2 {
			res, err := c.Acquire(ctx, "load#concurrent")
			if err != nil || !res.Granted() {
				t.Fatal(res.Outcome, err)
			}
			held = append(held, res.Lease)
		}
		// A waiter that takes a ticket for 3 s and is never heard of again.
		req := &store.AcquireRequest{Now: time.Now(), Items: []store.Item{{Dimension: "load#concurrent", Cost: 1}},
			ID: store.NewLeaseID(), TTL: time.Minute, Poll: time.Second, Queue: 3 * time.Second}
		var res store.AcquireResult
		if err := st.Acquire(ctx, req, &res); err != nil || res.Granted {
			t.Fatalf("dead waiter's acquisition = %+v, %v; want a denial with a ticket", res, err)
		}
		time.Sleep(time.Millisecond)
		for _, l := range held {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		l, err := c.Wait(within(ctx, t, time.Minute), []sluice.Request{{Dimension: "load#concurrent", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("granted after %v behind a dead ticket of cost 1 with 2 slots free, want at once", got)
		}
		_ = l.Release(ctx)
	})
}

// downStore fails every decision with store.ErrUnavailable while down.
type downStore struct {
	contract.Forward
	down atomic.Bool
}

func (s *downStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	if s.down.Load() {
		return store.ErrUnavailable
	}
	return s.Store.Acquire(ctx, req, res)
}

func (s *downStore) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	if s.down.Load() {
		return store.ErrUnavailable
	}
	return s.Forward.Dequeue(ctx, req)
}

// After an outage, the tickets of the waiters it made give up are removed
// by the client's next answered attempt: the queue recovers within one
// front-of-line poll, not when those tickets expire.
func TestQueueRecoversAfterAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &downStore{Forward: contract.Forward{Store: memstore.New()}}
		c, err := sluice.New(st)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close() // ends the releases of the acquisitions the outage cut off
		if err := c.PutBucket(ctx, sluice.Bucket{Name: "load#concurrent", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		res, err := c.Acquire(ctx, "load#concurrent")
		if err != nil || !res.Granted() {
			t.Fatal(res.Outcome, err)
		}
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := c.Wait(within(ctx, t, time.Minute), []sluice.Request{{Dimension: "load#concurrent", Cost: 1}})
				errs <- err
			}()
			time.Sleep(time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		st.down.Store(true)
		for range 2 {
			if err := <-errs; !errors.Is(err, sluice.ErrUnavailable) {
				t.Fatalf("Wait during the outage = %v, want ErrUnavailable", err)
			}
		}
		st.down.Store(false)
		if err := res.Lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		l, err := c.Wait(within(ctx, t, time.Minute), []sluice.Request{{Dimension: "load#concurrent", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if got, limit := time.Since(start), 100*time.Millisecond; got > limit {
			t.Errorf("granted %v after the outage with the slot free, want within %v", got, limit)
		}
		_ = l.Release(ctx)
	})
}

// The prediction holds for a request of the same dimensions that costs
// at least as much; a smaller one may be granted sooner, so it asks.
func TestFailFastPredictionByCost(t *testing.T) {
	for _, tc := range []struct {
		cost      int64
		wantCalls int64
	}{
		{5_000, 0},
		{9_000, 0},
		{4_999, 1},
	} {
		t.Run(strconv.FormatInt(tc.cost, 10), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				c, st := newCountingClient(t)
				drain(t, c, "openai#tpm", 10_000)
				if _, err := c.Wait(within(ctx, t, 100*time.Millisecond), []sluice.Request{{Dimension: "openai#tpm", Cost: 5_000}}); !errors.Is(err, sluice.ErrSlotTimeout) {
					t.Fatalf("first Wait = %v, want a slot timeout", err)
				}
				before := st.calls()
				_, err := c.Wait(within(ctx, t, 100*time.Millisecond), []sluice.Request{{Dimension: "openai#tpm", Cost: tc.cost}})
				if !errors.Is(err, sluice.ErrSlotTimeout) {
					t.Fatalf("Wait = %v, want a slot timeout", err)
				}
				if got := st.calls() - before; got != tc.wantCalls {
					t.Errorf("store calls = %d, want %d", got, tc.wantCalls)
				}
			})
		})
	}
}
