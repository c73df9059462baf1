package sluice_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// slowReserveStore answers every reservation 30 ms after it was asked,
// deciding it at the request's Now as memstore does, and reports
// store.CallerClock as callerClock says.
type slowReserveStore struct {
	*memstore.Store
	callerClock bool
}

func (s *slowReserveStore) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	time.Sleep(30 * time.Millisecond)
	return s.Store.Reserve(ctx, req, res)
}

func (s *slowReserveStore) CallerClock() bool { return s.callerClock }

// TestWaitOnCallerClockStartsAtTheValidInstant waits for 250 tokens that
// a drained bucket earns back 50 ms after the reservation's Now, through a
// store that answers 30 ms late: a store deciding at the request's Now made
// the reservation valid then, and the wait ends at 50 ms; one that may
// decide at its own later instant is waited for 50 ms from its answer
// (80 ms), never early.
func TestWaitOnCallerClockStartsAtTheValidInstant(t *testing.T) {
	tests := []struct {
		name        string
		callerClock bool
		want        time.Duration
	}{
		{"caller clock", true, 50 * time.Millisecond},
		{"store's own clock", false, 80 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &slowReserveStore{Store: memstore.New(), callerClock: tt.callerClock}
				c, err := sluice.New(st)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				if err := c.PutBucket(ctx, sluice.Bucket{Name: "c#tpm", Config: sluice.PerPeriod(sluice.Tokens, 5000, time.Second)}); err != nil {
					t.Fatal(err)
				}
				if _, err := c.Acquire(ctx, "c#tpm", sluice.WithCost(5000)); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				l, err := c.Wait(within(ctx, t, time.Second), []sluice.Request{{Dimension: "c#tpm", Cost: 250}})
				if err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got != tt.want {
					t.Errorf("Wait returned after %v, want %v", got, tt.want)
				}
				if got, want := l.CreatedAt().Sub(start), 50*time.Millisecond; got != want {
					t.Errorf("lease valid %v after the call, want %v", got, want)
				}
			})
		})
	}
}
