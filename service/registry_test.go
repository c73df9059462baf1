package service

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// gatedStore holds every Adjust until gate is closed: a store call in
// flight, as on a slow network.
type gatedStore struct {
	store.Store
	entered chan struct{}
	gate    chan struct{}
}

func (s *gatedStore) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	s.entered <- struct{}{}
	<-s.gate
	return s.Store.Adjust(ctx, req)
}

// TestRegistryNeverWaitsForALease registers a lease while another lease
// the registry holds is busy in a slow store call: the registry's sweep of
// expired leases must not hold every caller of the server behind it.
func TestRegistryNeverWaitsForALease(t *testing.T) {
	st := &gatedStore{Store: memstore.New(), entered: make(chan struct{}), gate: make(chan struct{})}
	defer close(st.gate)
	c, err := sluice.New(st)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.PutBucket(ctx, sluice.Bucket{Name: "v#tpm", Config: sluice.PerMinute(sluice.Tokens, 1000)}); err != nil {
		t.Fatal(err)
	}
	lease := func() *sluice.Lease {
		res, err := c.Acquire(ctx, "v#tpm", sluice.WithCost(10))
		if err != nil || !res.Granted() {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		return res.Lease
	}
	r := newRegistry(100)
	now := time.Now()
	busy := lease()
	r.put(busy, "", now)
	go func() { _, _ = busy.Adjust(ctx, "v#tpm", 5) }()
	<-st.entered // the lease is now busy in the store
	done := make(chan string)
	go func() { done <- r.put(lease(), "", now.Add(2*time.Second)) }() // a sweep is due
	select {
	case h := <-done:
		if h == "" {
			t.Error("put refused a lease with room to spare")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("put waited for a lease busy in the store")
	}
}
