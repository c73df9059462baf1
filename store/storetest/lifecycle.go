package storetest

import (
	"testing"
	"time"

	"github.com/ontopix/sluice/store"
)

// testLifecycle covers buckets that change under outstanding leases: a
// bucket deleted and re-created under the same name, and a concurrent
// bucket whose capacity changes while slots are held.
func testLifecycle(t *testing.T, h Harness) {
	// A lease granted on a bucket that was deleted and re-created must not
	// restore into the new bucket: the new bucket never lent that slot, and
	// restoring it would let one more holder in than the capacity.
	t.Run("ReleaseAfterRecreate", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("eleven#concurrent", 2))
		old := e.req(0, item("eleven#concurrent", 1))
		e.grant(old)
		if err := e.s.DeleteBucket(e.ctx, store.DeleteBucketRequest{Name: "eleven#concurrent"}); err != nil {
			t.Fatal(err)
		}
		e.put(0, slots("eleven#concurrent", 2))
		e.grant(e.req(0, item("eleven#concurrent", 1)))
		rr, err := e.s.Release(e.ctx, store.ReleaseRequest{Now: At(10), ID: old.ID, Hint: "eleven#concurrent"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rr.Restored) != 0 {
			t.Errorf("release of the old lease restored %+v into the re-created bucket, want nothing", rr.Restored)
		}
		e.wantTokens(10, "eleven#concurrent", 1000)
	})
	t.Run("ReconcileAfterRecreate", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("eleven#concurrent", 2))
		old := e.req(0, item("eleven#concurrent", 1))
		old.TTL = time.Second
		e.grant(old)
		if err := e.s.DeleteBucket(e.ctx, store.DeleteBucketRequest{Name: "eleven#concurrent"}); err != nil {
			t.Fatal(err)
		}
		e.put(0, slots("eleven#concurrent", 2))
		e.grant(e.req(0, item("eleven#concurrent", 1))) // TTL one minute
		if _, err := e.s.Reconcile(e.ctx, store.ReconcileRequest{Now: At(2000)}); err != nil {
			t.Fatal(err)
		}
		e.wantTokens(2000, "eleven#concurrent", 1000)
	})

	// A concurrent bucket never refills, so its balance is capacity minus
	// the slots held. Reconfiguring keeps that true: raising the capacity
	// frees the new slots at once, and lowering it may leave the balance
	// below zero until enough holders release. A reset fills the bucket to
	// capacity whatever is held (it is how an operator frees leaked slots);
	// releases of leases still out are then capped at capacity.
	t.Run("ConcurrentReconfigure", func(t *testing.T) {
		tests := []struct {
			name       string
			from, to   int64
			held       int64 // slots held (one per lease) when reconfiguring
			reset      bool
			wantAfter  int64 // millitokens right after PutBucket
			release    int64 // leases then released
			wantFinal  int64 // millitokens after the releases
			wantDenied bool  // a new acquisition right after PutBucket is denied
		}{
			{"raise frees the new slots", 5, 10, 5, false, 5000, 5, 10_000, false},
			{"lower below the held count goes negative", 10, 5, 8, false, -3000, 4, 1000, true},
			{"lower then release all", 10, 5, 8, false, -3000, 8, 5000, true},
			{"reset fills; releases are capped", 5, 5, 2, true, 5000, 2, 5000, false},
			{"reset with a new capacity", 5, 3, 2, true, 3000, 2, 3000, false},
			{"same capacity changes nothing", 4, 4, 3, false, 1000, 3, 4000, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				e := newEnv(t, h)
				e.put(0, slots("eleven#concurrent", tt.from))
				var ids []store.LeaseID
				for range tt.held {
					r := e.req(0, item("eleven#concurrent", 1))
					e.grant(r)
					ids = append(ids, r.ID)
				}
				if err := e.s.PutBucket(e.ctx, store.PutBucketRequest{Now: At(10), Bucket: slots("eleven#concurrent", tt.to), Reset: tt.reset}); err != nil {
					t.Fatal(err)
				}
				e.wantTokens(10, "eleven#concurrent", tt.wantAfter)
				res := e.acquire(e.req(10, item("eleven#concurrent", 1)))
				if res.Granted == tt.wantDenied {
					t.Fatalf("acquire after PutBucket: granted %t, want %t", res.Granted, !tt.wantDenied)
				}
				if res.Granted { // give it back so the arithmetic below is about the held leases
					var ls []store.LeaseRecord
					ls, err := e.s.Leases(e.ctx, store.LeaseQuery{Now: At(10)})
					if err != nil {
						t.Fatal(err)
					}
					for _, l := range ls {
						if !contains(ids, l.ID) {
							if _, err := e.s.Release(e.ctx, store.ReleaseRequest{Now: At(10), ID: l.ID, Hint: "eleven#concurrent"}); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
				for _, id := range ids[:tt.release] {
					if _, err := e.s.Release(e.ctx, store.ReleaseRequest{Now: At(20), ID: id, Hint: "eleven#concurrent"}); err != nil {
						t.Fatal(err)
					}
				}
				e.wantTokens(20, "eleven#concurrent", tt.wantFinal)
			})
		}
	})
}

func contains(ids []store.LeaseID, id store.LeaseID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
