package sluice_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store/memstore"
)

// advanceSetup returns a client on buckets of 6 000 tokens a minute (100
// a second), each drained by a lease of 6 000 held unsettled by another
// client of the same store (another process), so that a wait for 1 000
// tokens on any of them is valid 10 s later. It also returns the other
// client.
func advanceSetup(t *testing.T, dims ...string) (*sluice.Client, *confirmStore, map[string]*sluice.Lease, *sluice.Client) {
	t.Helper()
	ms := memstore.New()
	t.Cleanup(func() { ms.Close() })
	st := &confirmStore{Forward: contract.Forward{Store: ms}}
	c, err := sluice.New(st)
	if err != nil {
		t.Fatal(err)
	}
	other, err := sluice.New(ms)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	held := map[string]*sluice.Lease{}
	for _, d := range dims {
		if err := c.PutBucket(ctx, sluice.Bucket{Name: d, Config: sluice.PerPeriod(sluice.Tokens, 6000, time.Minute)}); err != nil {
			t.Fatal(err)
		}
		l, err := other.Wait(within(ctx, t, time.Second), []sluice.Request{{Dimension: d, Cost: 6000}})
		if err != nil {
			t.Fatal(err)
		}
		held[d] = l
	}
	return c, st, held, other
}

// waitAsync starts a Wait for reqs and returns a channel that receives how
// long it took, or fails the test if it fails.
func waitAsync(t *testing.T, c *sluice.Client, reqs ...sluice.Request) <-chan time.Duration {
	done := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		if _, err := c.Wait(within(context.Background(), t, time.Minute), reqs); err != nil {
			t.Error(err)
		}
		done <- time.Since(start)
	}()
	synctest.Wait() // reserved, asleep
	return done
}

func TestWaitMovesEarlierOnRefunds(t *testing.T) {
	tests := []struct {
		name    string
		settle  int64 // what the held lease of 6 000 settles at, 2.5 s in
		want    time.Duration
		comment string
	}{
		{"refund", 5000, 3 * time.Second, "valid at 10 s; 1 000 refunded at 2.5 s by another process moves it to 0 s, found by the look at 3 s"},
		{"partial refund", 5600, 6 * time.Second, "400 refunded: valid at 6 s"},
		{"refund in milliseconds rounds down", 5999, 9990 * time.Millisecond, "1 token refunded: 10 ms earlier"},
		{"debt", 6500, 15 * time.Second, "500 more: valid at 15 s"},
		{"nothing", 6000, 10 * time.Second, "valid at 10 s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, _, held, _ := advanceSetup(t, "a#tpm")
				done := waitAsync(t, c, sluice.Request{Dimension: "a#tpm", Cost: 1000})
				time.Sleep(2500 * time.Millisecond)
				if _, err := held["a#tpm"].Settle(context.Background(), "a#tpm", tt.settle); err != nil {
					t.Fatal(err)
				}
				if got := <-done; got != tt.want {
					t.Errorf("Wait returned after %v, want %v (%s)", got, tt.want, tt.comment)
				}
			})
		})
	}
}

// TestWaitMovesEarlierOnlyWhenEveryItemIs: a reservation of two items
// moves earlier only as far as the later of them allows; an item whose
// bucket pays every reservation on it no longer holds it back.
func TestWaitMovesEarlierOnlyWhenEveryItemIs(t *testing.T) {
	tests := []struct {
		name       string
		settleA    int64 // a#tpm's held lease settles at this, 2.5 s in
		settleB    int64 // b#tpm's
		want       time.Duration
		whyWanting string
	}{
		{"one refunded", 5000, 6000, 10 * time.Second, "b#tpm still makes it valid at 10 s"},
		{"both refunded", 5000, 5500, 5 * time.Second, "a#tpm at 0 s, b#tpm at 5 s"},
		{"one refunded, one in debt", 5000, 6200, 12 * time.Second, "b#tpm at 12 s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, _, held, _ := advanceSetup(t, "a#tpm", "b#tpm")
				done := waitAsync(t, c, sluice.Request{Dimension: "a#tpm", Cost: 1000}, sluice.Request{Dimension: "b#tpm", Cost: 1000})
				time.Sleep(2500 * time.Millisecond)
				ctx := context.Background()
				if _, err := held["a#tpm"].Settle(ctx, "a#tpm", tt.settleA); err != nil {
					t.Fatal(err)
				}
				if _, err := held["b#tpm"].Settle(ctx, "b#tpm", tt.settleB); err != nil {
					t.Fatal(err)
				}
				if got := <-done; got != tt.want {
					t.Errorf("Wait returned after %v, want %v (%s)", got, tt.want, tt.whyWanting)
				}
			})
		})
	}
}

// TestWaitLooksOncePerPollInterval: a reservation looks for settlements
// once every poll interval while its instant is further away, then
// confirms at the instant: a short wait costs one Peek, as before.
func TestWaitLooksOncePerPollInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st, _, _ := advanceSetup(t, "a#tpm")
		before := st.peeks.Load()
		if got, want := <-waitAsync(t, c, sluice.Request{Dimension: "a#tpm", Cost: 1000}), 10*time.Second; got != want {
			t.Fatalf("Wait returned after %v, want %v", got, want)
		}
		if got, want := st.peeks.Load()-before, int64(10); got != want {
			t.Errorf("%d peeks for a 10 s wait, want %d (at 1 s, 2 s, … 9 s and the confirmation at 10 s)", got, want)
		}
	})
}

// TestWaitLookFailureWaitsForTheInstant: a look that fails changes
// nothing; the confirmation at the instant decides.
func TestWaitLookFailureWaitsForTheInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st, held, _ := advanceSetup(t, "a#tpm")
		done := waitAsync(t, c, sluice.Request{Dimension: "a#tpm", Cost: 1000})
		st.failPeeks.Store(true)
		if _, err := held["a#tpm"].Settle(context.Background(), "a#tpm", 5000); err != nil {
			t.Fatal(err)
		}
		time.Sleep(9500 * time.Millisecond)
		st.failPeeks.Store(false)
		if got, want := <-done, 10*time.Second; got != want {
			t.Errorf("Wait returned after %v, want %v (every look failed until 9.5 s)", got, want)
		}
	})
}

// TestWaitLooksAtOnceAfterARefundHere: a refund settled by this client
// makes its waiting reservations look again at once, but at most every
// tenth of the poll interval, rather than at their next look.
func TestWaitLooksAtOnceAfterARefundHere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, _, _ := advanceSetup(t)
		ctx := context.Background()
		if err := c.PutBucket(ctx, sluice.Bucket{Name: "a#tpm", Config: sluice.PerPeriod(sluice.Tokens, 6000, time.Minute)}); err != nil {
			t.Fatal(err)
		}
		mine, err := c.Wait(within(ctx, t, time.Second), []sluice.Request{{Dimension: "a#tpm", Cost: 6000}})
		if err != nil {
			t.Fatal(err)
		}
		done := waitAsync(t, c, sluice.Request{Dimension: "a#tpm", Cost: 1000}) // valid at 10 s
		time.Sleep(2500 * time.Millisecond)
		if _, err := mine.Settle(ctx, "a#tpm", 5400); err != nil { // 600 back: valid at 4 s
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if _, err := mine.Settle(ctx, "a#tpm", 4000); err != nil { // 1 400 more: valid at once
			t.Fatal(err)
		}
		if got, want := <-done, 2600*time.Millisecond; got != want {
			t.Errorf("Wait returned after %v, want %v (the refund at 2.55 s looked at 100 ms after the one at 2.5 s)", got, want)
		}
	})
}
