package dynamostore

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

func unixSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// TestMixedFleetNoLostIncrement races Sluice (fast path, three handles
// taking and returning slots) against the SDKs returning slots it
// took beforehand, with its exact write: "SET tokens = tokens + :cost",
// which leaves the version alone. Sluice's writes used to be conditioned on
// the version only and erased such increments. At the end every slot must
// be back: tokens exactly the capacity.
//
// (The SDKs loses such increments on its own: its acquisition writes
// an absolute balance conditioned on the version only, so it can erase a
// concurrent release of its own. Only Sluice's side can be tested here.)
func TestMixedFleetNoLostIncrement(t *testing.T) {
	const capacity, seedSlots, rounds = 40, 30, 15
	db := newClient()
	table := newTable(t, db)
	put(t, openStore(t, db, table), time.Now(), store.Bucket{Name: "m#concurrent", Config: bucket.ConcurrentSlots(capacity)})
	ctx := context.Background()
	c := &seedSDK{db: newClient(), table: table}
	var held []*sdkLease
	for range seedSlots {
		l, err := c.acquire(ctx, "m#concurrent", 1, unixSeconds(time.Now()), 3600, 3)
		if err != nil || l == nil {
			t.Fatalf("SDK acquire = %v, %v", l, err)
		}
		held = append(held, l)
	}
	var wg sync.WaitGroup
	var grants atomic.Int64
	for w := range 3 {
		s := openStore(t, newClient(), table)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				id := store.NewLeaseID()
				for {
					var res store.AcquireResult
					err := s.Acquire(ctx, &store.AcquireRequest{Now: time.Now(), Items: []store.Item{{Dimension: "m#concurrent"}}, ID: id, TTL: time.Hour}, &res)
					if err == nil && res.Granted {
						break
					}
					if err != nil && !errors.Is(err, store.ErrContention) {
						t.Errorf("sluice %d: acquire: %v", w, err)
						return
					}
					time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
				}
				grants.Add(1)
				if r, err := s.Release(ctx, store.ReleaseRequest{Now: time.Now(), ID: id}); err != nil || !r.Released {
					t.Errorf("sluice %d: release = %+v, %v", w, r, err)
				}
			}
		}()
	}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(held); i += 3 {
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
				if err := c.release(ctx, held[i], true); err != nil {
					t.Errorf("SDK release: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	st := peekOne(t, openStore(t, db, table), "m#concurrent")
	t.Logf("%d Sluice grants raced %d SDK releases", grants.Load(), seedSlots)
	if st.Tokens != capacity*bucket.Milli || st.ActiveLeases != 0 {
		t.Errorf("after every slot was returned: %d millitokens, %d leases; want %d and 0 (an increment was lost)", st.Tokens, st.ActiveLeases, capacity*bucket.Milli)
	}
}

// TestMixedFleetNoDoubleRestore lets the SDKs' reconciler reclaim an
// expired Sluice lease before Sluice's reconciler runs, then runs Sluice's:
// the slot comes back once. The SDKs' reconciler used to restore the
// item's cost and leave the bucket's holder entry, from which Sluice
// restored it a second time. A live lease keeps the balance below
// capacity, so that the capacity guard cannot hide a double restore. The
// SDKs' own expired lease is reclaimed once too, whichever reconciler
// runs first.
func TestMixedFleetNoDoubleRestore(t *testing.T) {
	for _, seedsFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "SDK reconciler first", false: "sluice reconciler first"}[seedsFirst], func(t *testing.T) {
			ctx := context.Background()
			db := newClient()
			table := newTable(t, db)
			s := openStore(t, db, table)
			now := time.Now()
			put(t, s, now.Add(-2*time.Hour), store.Bucket{Name: "m#concurrent", Config: bucket.ConcurrentSlots(5)})
			acquireAt(t, s, now.Add(-time.Hour), time.Minute, false, store.Item{Dimension: "m#concurrent"}) // abandoned
			acquireAt(t, s, now, time.Hour, false, store.Item{Dimension: "m#concurrent"})                   // live
			c := &seedSDK{db: db, table: table}
			if l, err := c.acquire(ctx, "m#concurrent", 1, unixSeconds(now.Add(-time.Hour)), 60, 3); err != nil || l == nil {
				t.Fatalf("SDK acquire = %v, %v", l, err)
			}
			seedsRun := func() {
				if _, err := c.reconcile(ctx, unixSeconds(now)); err != nil {
					t.Fatal(err)
				}
			}
			sluiceRun := func() {
				if _, err := s.Reconcile(ctx, store.ReconcileRequest{Now: now, Limit: store.DefaultReconcileLimit}); err != nil {
					t.Fatal(err)
				}
			}
			if seedsFirst {
				seedsRun()
				sluiceRun()
			} else {
				sluiceRun()
				seedsRun()
			}
			seedsRun()
			sluiceRun()
			st := peekOne(t, s, "m#concurrent")
			if st.Tokens != 4*bucket.Milli || st.ActiveLeases != 1 {
				t.Errorf("after both reconcilers: %d millitokens, %d leases; want 4000 (one live lease) and 1", st.Tokens, st.ActiveLeases)
			}
		})
	}
}

// TestMixedFleetShare measures, without asserting, how a saturated
// requests bucket is shared between Sluice's fast path and the SDKs
// under equal demand (three workers each), and with Sluice on the read-then-transact
// path; docs/stores/dynamodb.md reports the figures.
func TestMixedFleetShare(t *testing.T) {
	for _, seedsPath := range []bool{false, true} {
		db := newClient()
		table := newTable(t, db)
		put(t, openStore(t, db, table), time.Now(), store.Bucket{Name: "m#rpm", Config: bucket.PerPeriod(bucket.Requests, 20, time.Second)})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var wg sync.WaitGroup
		var sl, sd atomic.Int64
		for range 3 {
			var opts []Option
			if seedsPath {
				opts = append(opts, WithReadThenTransact())
			}
			s := openStore(t, newClient(), table, opts...)
			wg.Add(2)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					var res store.AcquireResult
					err := s.Acquire(ctx, &store.AcquireRequest{Now: time.Now(), Items: []store.Item{{Dimension: "m#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
					if err == nil && res.Granted {
						sl.Add(1)
					} else {
						time.Sleep(time.Duration(25+rand.IntN(175)) * time.Millisecond)
					}
				}
			}()
			c := &seedSDK{db: newClient(), table: table}
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if l, err := c.acquire(ctx, "m#rpm", 1, unixSeconds(time.Now()), 60, 3); err == nil && l != nil {
						sd.Add(1)
					} else {
						time.Sleep(50 * time.Millisecond)
					}
				}
			}()
		}
		wg.Wait()
		cancel()
		total := sl.Load() + sd.Load()
		t.Logf("read-then-transact %t: Sluice %d grants, SDKs %d grants: Sluice share %.0f %%", seedsPath, sl.Load(), sd.Load(), 100*float64(sl.Load())/float64(max(total, 1)))
	}
}
