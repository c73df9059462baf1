package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// confirmStore records reservations, peeks and cancellations, and can
// fail peeks as an unreachable store does.
type confirmStore struct {
	contract.Forward
	reserves, peeks atomic.Int64
	failPeeks       atomic.Bool
	cancels         []store.CancelRequest
}

func (s *confirmStore) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	s.reserves.Add(1)
	return s.Forward.Reserve(ctx, req, res)
}

func (s *confirmStore) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	s.peeks.Add(1)
	if s.failPeeks.Load() {
		return nil, fmt.Errorf("peek: connection refused: %w", store.ErrUnavailable)
	}
	return s.Store.Peek(ctx, req)
}

func (s *confirmStore) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	s.cancels = append(s.cancels, req)
	return s.Forward.Cancel(ctx, req)
}

// confirmSetup returns a client on a bucket of 5 000 tokens earning 5 000
// a second, drained by a lease of 5 000 held unsettled, so that a wait for
// 250 tokens is valid 50 ms later.
func confirmSetup(t *testing.T, opts ...sluice.Option) (*sluice.Client, *confirmStore, *sluice.Lease) {
	t.Helper()
	st := &confirmStore{Forward: contract.Forward{Store: memstore.New()}}
	t.Cleanup(func() { st.Close() })
	c, err := sluice.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.PutBucket(ctx, sluice.Bucket{Name: "c#tpm", Config: sluice.PerPeriod(sluice.Tokens, 5000, time.Second)}); err != nil {
		t.Fatal(err)
	}
	l, err := c.Wait(within(ctx, t, time.Second), []sluice.Request{{Dimension: "c#tpm", Cost: 5000}})
	if err != nil {
		t.Fatal(err)
	}
	return c, st, l
}

func TestWaitConfirmsOnceWhenNothingWasSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st, _ := confirmSetup(t)
		start := time.Now()
		if _, err := c.Wait(within(context.Background(), t, time.Second), []sluice.Request{{Dimension: "c#tpm", Cost: 250}}); err != nil {
			t.Fatal(err)
		}
		if got, want := time.Since(start), 50*time.Millisecond; got != want {
			t.Errorf("Wait returned after %v, want %v", got, want)
		}
		if r, p := st.reserves.Load(), st.peeks.Load(); r != 2 || p != 1 {
			t.Errorf("store calls: %d reserves and %d peeks, want 2 and 1 (the drain needs no confirmation)", r, p)
		}
	})
}

func TestWaitWaitsOutDebtSettledWhileItWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st, held := confirmSetup(t)
		ctx := context.Background()
		done := make(chan time.Duration)
		start := time.Now()
		go func() {
			if _, err := c.Wait(within(ctx, t, time.Second), []sluice.Request{{Dimension: "c#tpm", Cost: 250}}); err != nil {
				t.Error(err)
			}
			done <- time.Since(start)
		}()
		synctest.Wait() // reserved, sleeping until +50 ms
		time.Sleep(10 * time.Millisecond)
		if _, err := held.Settle(ctx, "c#tpm", 5500); err != nil { // 500 tokens of debt: 100 ms more
			t.Fatal(err)
		}
		if got, want := <-done, 150*time.Millisecond; got != want {
			t.Errorf("Wait returned after %v, want %v (valid at 50 ms, plus 500 tokens settled at 10 ms)", got, want)
		}
		if p := st.peeks.Load(); p != 2 {
			t.Errorf("%d peeks, want 2 (one that finds the debt, one that finds nothing new)", p)
		}
	})
}

func TestWaitTimesOutWhenSettledDebtMovesItPastTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st, held := confirmSetup(t)
		ctx := context.Background()
		errc := make(chan error)
		start := time.Now()
		go func() {
			_, err := c.Wait(within(ctx, t, 100*time.Millisecond), []sluice.Request{{Dimension: "c#tpm", Cost: 250}})
			errc <- err
		}()
		synctest.Wait()
		if _, err := held.Settle(ctx, "c#tpm", 5500); err != nil {
			t.Fatal(err)
		}
		err := <-errc
		var te *sluice.SlotTimeoutError
		if !errors.As(err, &te) {
			t.Fatalf("Wait = %v, want a *SlotTimeoutError", err)
		}
		if len(st.cancels) != 1 {
			t.Fatalf("%d cancellations, want 1", len(st.cancels))
		}
		if got, want := st.cancels[0].ValidAt, start.Add(50*time.Millisecond); !got.Equal(want) {
			t.Errorf("cancelled with ValidAt %v, want the original valid instant %v", got, want)
		}
		if got := time.Since(start); got != 50*time.Millisecond {
			t.Errorf("Wait failed after %v, want at the valid instant that found the debt (50ms)", got)
		}
	})
}

func TestWaitConfirmationDuringAnOutage(t *testing.T) {
	for _, tt := range []struct {
		policy       sluice.FailurePolicy
		wantErr      bool
		wantDegraded bool
	}{
		{sluice.FailClosed, true, false},
		{sluice.FailOpen, false, true},
	} {
		t.Run(fmt.Sprint(tt.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, st, _ := confirmSetup(t, config(func(c *sluice.Config) { c.FailurePolicy = tt.policy }))
				st.failPeeks.Store(true)
				l, err := c.Wait(within(context.Background(), t, time.Minute), []sluice.Request{{Dimension: "c#tpm", Cost: 250}})
				if got := err != nil; got != tt.wantErr {
					t.Fatalf("Wait error = %v, want an error: %v", err, tt.wantErr)
				}
				if tt.wantErr {
					if !errors.Is(err, sluice.ErrUnavailable) {
						t.Errorf("Wait = %v, want it to match ErrUnavailable", err)
					}
					if len(st.cancels) != 1 {
						t.Errorf("%d cancellations, want 1", len(st.cancels))
					}
					return
				}
				if l.Degraded() != tt.wantDegraded {
					t.Errorf("lease Degraded() = %v, want %v", l.Degraded(), tt.wantDegraded)
				}
				// Its settlement still reaches the store, as the charge it is.
				st.failPeeks.Store(false)
				s, err := l.Settle(context.Background(), "c#tpm", 300)
				if err != nil || s.Applied != 50_000 {
					t.Errorf("Settle(300) of the unconfirmed lease = %+v, %v; want 50 tokens applied", s, err)
				}
			})
		})
	}
}
