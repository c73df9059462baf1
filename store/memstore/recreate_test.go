package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// A lease granted on a bucket that was then deleted and re-created under the
// same name must not restore its cost into the new bucket: the new bucket
// never lent it, and restoring would free a slot someone else holds.
func TestReleaseAfterRecreateDoesNotRestoreIntoNewBucket(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := memstore.New()
	b := store.Bucket{Name: "elevenlabs#concurrent", Config: bucket.ConcurrentSlots(2)}
	if err := st.PutBucket(ctx, store.PutBucketRequest{Now: now, Bucket: b}); err != nil {
		t.Fatal(err)
	}
	acquire := func() store.LeaseID {
		req := store.AcquireRequest{Now: now, Items: []store.Item{{Dimension: b.Name, Cost: 1}}, ID: store.NewLeaseID(), TTL: time.Minute}
		var res store.AcquireResult
		if err := st.Acquire(ctx, &req, &res); err != nil || !res.Granted {
			t.Fatalf("acquire = %v, %v", res.Granted, err)
		}
		return req.ID
	}
	old := acquire()
	if err := st.DeleteBucket(ctx, store.DeleteBucketRequest{Name: b.Name}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutBucket(ctx, store.PutBucketRequest{Now: now, Bucket: b}); err != nil {
		t.Fatal(err)
	}
	acquire() // the new bucket lends one of its two slots
	rr, err := st.Release(ctx, store.ReleaseRequest{Now: now, ID: old})
	if err != nil || !rr.Released || len(rr.Restored) != 0 {
		t.Fatalf("release of the old lease = %+v, %v; want released, nothing restored", rr, err)
	}
	ps, err := st.Peek(ctx, store.PeekRequest{Now: now, Dimensions: []string{b.Name}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ps[0].Tokens, int64(1000); got != want {
		t.Fatalf("new bucket balance = %d, want %d (one slot still held)", got, want)
	}
}
