package pgstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// TestReconcilersAndReleasesNeverDoubleRestore races four reconcilers
// (small batches, FOR UPDATE SKIP LOCKED) against releases of the same
// expired leases: every lease's slot must come back exactly once, so the
// counts add up and the capacity guard never fires.
func TestReconcilersAndReleasesNeverDoubleRestore(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	const capacity, n = 10_000, 600
	put(t, s, store.Bucket{Name: "el#concurrent", Config: bucket.ConcurrentSlots(capacity)})
	put(t, s, store.Bucket{Name: "el#rpm", Config: bucket.PerPeriod(bucket.Requests, capacity, time.Hour)})
	ids := make([]store.LeaseID, n)
	var res store.AcquireResult
	for i := range ids {
		ids[i] = store.NewLeaseID()
		items := []store.Item{{Dimension: "el#concurrent"}}
		if i%3 == 0 {
			items = append(items, store.Item{Dimension: "el#rpm"})
		}
		req := &store.AcquireRequest{Now: t0, Items: items, ID: ids[i], TTL: time.Millisecond}
		if err := s.Acquire(ctx, req, &res); err != nil || !res.Granted {
			t.Fatalf("acquire %d: %v %+v", i, err, res)
		}
	}
	later := t0.Add(time.Second)
	var mu sync.Mutex
	var total store.ReconcileResult
	released := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				r, err := s.Reconcile(ctx, store.ReconcileRequest{Now: later, Limit: 25})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total.Restored += r.Restored
				total.Reclaimed += r.Reclaimed
				total.AlreadyCapped += r.AlreadyCapped
				total.Orphans += r.Orphans
				mu.Unlock()
				if r.Restored == 0 && !r.More {
					return
				}
			}
		})
	}
	for w := range 2 {
		wg.Go(func() {
			for i := w; i < n; i += 2 {
				r, err := s.Release(ctx, store.ReleaseRequest{Now: later, ID: ids[i]})
				if err != nil {
					t.Error(err)
					return
				}
				if r.Released {
					mu.Lock()
					released++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if total.Restored+released != n || total.Reclaimed+released != n || total.AlreadyCapped != 0 || total.Orphans != 0 {
		t.Errorf("reconciled %+v and released %d; want restored+released = reclaimed+released = %d, nothing capped", total, released, n)
	}
	if tok := s.peekTokens(t, later, "el#concurrent"); tok != capacity*bucket.Milli {
		t.Errorf("concurrent bucket holds %d millitokens, want %d", tok, capacity*bucket.Milli)
	}
	if left, err := s.Leases(ctx, store.LeaseQuery{Now: later}); err != nil || len(left) != 0 {
		t.Errorf("leases left: %d, %v", len(left), err)
	}
}

func (s *Store) peekTokens(t *testing.T, now time.Time, dim string) int64 {
	t.Helper()
	st, err := s.Peek(context.Background(), store.PeekRequest{Now: now, Dimensions: []string{dim}})
	if err != nil {
		t.Fatal(err)
	}
	return st[0].Tokens
}
