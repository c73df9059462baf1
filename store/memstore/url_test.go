package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/storeurl"
)

// openers opens memory:// only.
func openers() storeurl.Openers { return storeurl.Openers{memstore.URLOpener()} }

// TestOpenURL: Open returns the memory store itself (so that the client
// sees what it implements), and storeurl.WithMemory a given store, left open.
func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	st, err := openers().Open(ctx, "memory://")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*memstore.Store); !ok {
		t.Errorf("memory:// opened a %T, want *memstore.Store", st)
	}
	st.Close()

	mem := memstore.New()
	defer mem.Close()
	st, err = openers().Open(ctx, "memory://", storeurl.WithMemory(mem))
	if err != nil {
		t.Fatalf("storeurl.WithMemory: %v", err)
	}
	if err := st.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: store.Bucket{Name: "m", Config: bucket.ConcurrentSlots(1)}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if got, err := mem.ListBuckets(ctx, store.ListBucketsRequest{Now: time.Now()}); err != nil || len(got) != 1 {
		t.Errorf("the given memory store after Close: %v, %v; want it open, holding the bucket", got, err)
	}
}

func TestMemoryShared(t *testing.T) {
	mem := memstore.New()
	op, err := openers().OpenDetailed(context.Background(), "memory://", storeurl.Options{Memory: mem})
	if err != nil || contract.Unwrap(op.Store) != mem {
		t.Fatalf("%v", err)
	}
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.ListBuckets(context.Background(), store.ListBucketsRequest{Now: time.Now()}); err != nil {
		t.Errorf("Close closed the injected store: %v", err)
	}
}
