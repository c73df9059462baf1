package sluice_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
)

// A bucket's state shows the line: the callers waiting for a concurrent
// bucket's slot, and how far the reservations of a rate bucket reach.
func TestBucketStateShowsTheLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, _ := newSlotsClient(t, 1)
		if err := c.PutBucket(ctx, sluice.Bucket{Name: "load#rpm", Config: sluice.PerMinute(sluice.Requests, 60)}); err != nil {
			t.Fatal(err)
		}
		held, err := c.Acquire(ctx, "load#concurrent")
		if err != nil || held.Lease == nil {
			t.Fatalf("acquire the slot: %v %v", held.Outcome, err)
		}
		for range 60 {
			if res, err := c.Acquire(ctx, "load#rpm"); err != nil || res.Lease == nil {
				t.Fatalf("spend the rate bucket: %v %v", res.Outcome, err)
			}
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for _, dim := range []string{"load#concurrent", "load#concurrent", "load#rpm", "load#rpm"} {
			go func() { _, _ = c.Wait(wctx, []sluice.Request{{Dimension: dim, Cost: 1}}) }()
		}
		synctest.Wait()
		slots, err := c.GetBucket(ctx, "load#concurrent")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := slots.Waiters, 2; got != want {
			t.Errorf("concurrent bucket: Waiters %d, want %d", got, want)
		}
		rate, err := c.GetBucket(ctx, "load#rpm")
		if err != nil {
			t.Fatal(err)
		}
		// Two more requests at one a second: the second is valid 2 s on.
		if got, want := rate.ReservedUntil.Sub(rate.Now), 2*time.Second; got < want-10*time.Millisecond || got > want {
			t.Errorf("rate bucket: ReservedUntil is %v after Now, want %v", got, want)
		}
		if got := rate.Waiters; got != 0 {
			t.Errorf("rate bucket: Waiters %d, want 0", got)
		}
		cancel()
		_ = held.Lease.Release(ctx)
		synctest.Wait()
	})
}
