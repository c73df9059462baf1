package storetest

import (
	"testing"
	"time"

	"github.com/ontopix/sluice/store"
)

// testReconcile covers the Reconcile semantics: restoring expired
// concurrent leases with the capacity guard, deleting expired records and
// orphans, batching, and idempotence.
func testReconcile(t *testing.T, h Harness) {
	// lease acquires items at +0 with a 1 s TTL and returns its id.
	lease := func(e *env, record bool, items ...store.Item) store.LeaseID {
		r := e.req(0, items...)
		r.TTL, r.Record = time.Second, record
		e.grant(r)
		return r.ID
	}
	reconcile := func(e *env, at int64, limit int, want store.ReconcileResult) {
		e.t.Helper()
		got, err := e.s.Reconcile(e.ctx, store.ReconcileRequest{Now: At(at), Limit: limit})
		if err != nil || !equalReconcile(got, want) {
			e.t.Errorf("Reconcile(+%dms, limit %d) = %+v, %v; want %+v", at, limit, got, err, want)
		}
	}

	t.Run("RestoresAndIsIdempotent", func(t *testing.T) {
		e := newEnv(t, h)
		a, b := e.twoDims("concurrent")
		e.put(0, slots(a, 3))
		e.put(0, slots(b, 4))
		lease(e, false, item(a, 1))
		lease(e, false, item(a, 2), item(b, 3))
		lease(e, false, item(b, 0))
		e.wantTokens(0, a, 0)
		reconcile(e, 999, 0, store.ReconcileResult{}) // nothing has expired yet
		want := store.ReconcileResult{Restored: 3, Reclaimed: 3, Dimensions: []string{a, b}}
		reconcile(e, 1000, 0, want)
		e.wantTokens(1000, a, 3000)
		e.wantTokens(1000, b, 4000)
		before := e.snapshot(1000)
		reconcile(e, 1000, 0, store.ReconcileResult{})
		reconcile(e, 5000, 0, store.ReconcileResult{})
		e.unchanged(1000, before, "a second reconcile")
	})

	t.Run("ReleaseThenReconcile", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("a#concurrent", 2))
		id := lease(e, false, item("a#concurrent", 2))
		rel, err := e.s.Release(e.ctx, store.ReleaseRequest{Now: At(1500), ID: id}) // expired, not yet reclaimed
		if err != nil || !rel.Released || !equalRestored(rel.Restored, []store.Restored{{Dimension: "a#concurrent", Cost: 2}}) {
			t.Errorf("Release of an expired lease = %+v, %v; want released, 2 restored", rel, err)
		}
		reconcile(e, 1500, 0, store.ReconcileResult{})
		e.wantTokens(1500, "a#concurrent", 2000)
	})

	t.Run("ReconcileThenRelease", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("a#concurrent", 2))
		id := lease(e, false, item("a#concurrent", 2))
		reconcile(e, 1500, 0, store.ReconcileResult{Restored: 1, Reclaimed: 1, Dimensions: []string{"a#concurrent"}})
		rel, err := e.s.Release(e.ctx, store.ReleaseRequest{Now: At(1600), ID: id})
		if err != nil || rel.Released || len(rel.Restored) != 0 {
			t.Errorf("Release after reconcile = %+v, %v; want Released false, nothing restored", rel, err)
		}
		e.wantTokens(1600, "a#concurrent", 2000)
		_, err = e.s.Extend(e.ctx, store.ExtendRequest{Now: At(1600), ID: id, TTL: time.Second})
		wantErr(t, "Extend after reconcile", err, store.ErrUnknownLease)
	})

	t.Run("CapacityGuard", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("a#concurrent", 2))
		lease(e, false, item("a#concurrent", 1))
		if err := e.s.PutBucket(e.ctx, store.PutBucketRequest{Now: At(500), Bucket: slots("a#concurrent", 2), Reset: true}); err != nil {
			t.Fatal(err)
		}
		e.wantTokens(500, "a#concurrent", 2000)
		reconcile(e, 1000, 0, store.ReconcileResult{Restored: 1, Reclaimed: 1, AlreadyCapped: 1, Dimensions: []string{"a#concurrent"}})
		e.wantTokens(1000, "a#concurrent", 2000)
	})

	t.Run("ShrinkUnderHeldLeases", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("a#concurrent", 3))
		lease(e, false, item("a#concurrent", 2))
		lease(e, false, item("a#concurrent", 1))
		// Shrink to 2 slots with 3 held: the balance goes to -1 slot, and
		// reclaiming the 3 held slots brings it to exactly 2, uncapped.
		if err := e.s.PutBucket(e.ctx, store.PutBucketRequest{Now: At(0), Bucket: slots("a#concurrent", 2)}); err != nil {
			t.Fatal(err)
		}
		e.wantTokens(0, "a#concurrent", -1000)
		got, err := e.s.Reconcile(e.ctx, store.ReconcileRequest{Now: At(1000)})
		if err != nil || got.Restored != 2 || got.Reclaimed != 2 || got.AlreadyCapped != 0 {
			t.Errorf("Reconcile = %+v, %v; want 2 restored, 2 reclaimed, none capped", got, err)
		}
		e.wantTokens(1000, "a#concurrent", 2000)
	})

	t.Run("Orphans", func(t *testing.T) {
		e := newEnv(t, h)
		a, b := e.twoDims("concurrent")
		e.put(0, slots(a, 2))
		e.put(0, slots(b, 2))
		lease(e, false, item(a, 1))
		lease(e, false, item(b, 1))
		lease(e, false, item(a, 1), item(b, 1))
		if err := e.s.DeleteBucket(e.ctx, store.DeleteBucketRequest{Name: a}); err != nil {
			t.Fatal(err)
		}
		// The mixed lease still restores b; the a-only lease is an orphan.
		reconcile(e, 1000, 0, store.ReconcileResult{Restored: 3, Reclaimed: 2, Orphans: 1, Dimensions: []string{b}})
		e.wantTokens(1000, b, 2000)
		if ls, err := e.s.Leases(e.ctx, store.LeaseQuery{Now: At(1000)}); err != nil || len(ls) != 0 {
			t.Errorf("Leases = %+v, %v; want none", ls, err)
		}
	})

	t.Run("LimitAndMore", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("a#concurrent", 5))
		for range 5 {
			lease(e, false, item("a#concurrent", 1))
		}
		dims := []string{"a#concurrent"}
		reconcile(e, 1000, 2, store.ReconcileResult{Restored: 2, Reclaimed: 2, Dimensions: dims, More: true})
		reconcile(e, 1000, 2, store.ReconcileResult{Restored: 2, Reclaimed: 2, Dimensions: dims, More: true})
		reconcile(e, 1000, 2, store.ReconcileResult{Restored: 1, Reclaimed: 1, Dimensions: dims})
		reconcile(e, 1000, 2, store.ReconcileResult{})
		e.wantTokens(1000, "a#concurrent", 5000)
	})

	t.Run("TimeBasedRecordsDeletedWithoutRestoring", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, tpm("x#tpm", 1000))
		e.put(0, rpm("x#rpm", 10))
		lease(e, true, item("x#tpm", 100), item("x#rpm", 10))
		reconcile(e, 1000, 0, store.ReconcileResult{Restored: 1, Dimensions: []string{"x#rpm", "x#tpm"}})
		e.wantTokens(1000, "x#tpm", 900_000+16_666) // refill only
		e.wantTokens(1000, "x#rpm", 166)
		if ls, err := e.s.Leases(e.ctx, store.LeaseQuery{Now: At(1000)}); err != nil || len(ls) != 0 {
			t.Errorf("Leases = %+v, %v; want none", ls, err)
		}
	})
}
