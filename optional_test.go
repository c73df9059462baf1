package sluice_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// coreOnly is a store that implements the core contract only (store.Store):
// the memory store, whose optional operations it hides. It counts
// acquisitions.
type coreOnly struct {
	store.Store
	acquires atomic.Int64
}

func (s *coreOnly) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	s.acquires.Add(1)
	if req.Queue != 0 {
		return errors.New("coreOnly: the client asked a store without waiter queues to queue")
	}
	return s.Store.Acquire(ctx, req, res)
}

// TestCoreOnlyStoreWaitsByPolling shows the fallback for a store without
// store.Queuer: Wait, Slot and WithSlot poll, on time-based and concurrent
// dimensions alike, and complete.
func TestCoreOnlyStoreWaitsByPolling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &coreOnly{Store: memstore.New()}
		c, err := sluice.New(st)
		if err != nil {
			t.Fatal(err)
		}
		putSeedBuckets(t, c)

		drain(t, c, "openai#rpm", 100)
		before := st.acquires.Load()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l, err := c.Wait(wctx, []sluice.Request{{Dimension: "openai#rpm", Cost: 1}})
		if err != nil {
			t.Fatalf("Wait on a drained requests bucket: %v", err)
		}
		if n := st.acquires.Load() - before; n < 2 {
			t.Errorf("Wait made %d acquisitions, want at least 2 (a denial, then polls until the grant)", n)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}

		// Both slots held; a third caller polls until one is released.
		var held []*sluice.Lease
		for range 2 {
			res, err := c.Acquire(ctx, "elevenlabs#concurrent")
			if err != nil || !res.Granted() {
				t.Fatalf("Acquire a slot: %v, %v", res.Outcome, err)
			}
			held = append(held, res.Lease)
		}
		go func() {
			time.Sleep(time.Second)
			if err := held[0].Release(ctx); err != nil {
				t.Error(err)
			}
		}()
		ran := false
		err = c.WithSlot(wctx, "elevenlabs#concurrent", func(context.Context, *sluice.Lease) error {
			ran = true
			return nil
		})
		if err != nil || !ran {
			t.Fatalf("WithSlot on a full concurrent bucket: ran %t, %v", ran, err)
		}
		synctest.Wait()
		if err := held[1].Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCoreOnlyStoreCooldownAndSyncUnsupported shows the fallback for a
// store without store.Cooler and store.Syncer: Cooldown, CooldownFor and
// Sync return an error matching errors.ErrUnsupported and change nothing.
func TestCoreOnlyStoreCooldownAndSyncUnsupported(t *testing.T) {
	ctx := context.Background()
	c, err := sluice.New(&coreOnly{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	putSeedBuckets(t, c)
	before := tokens(t, c, "openai#tpm")
	_, err1 := c.Cooldown(ctx, "openai#tpm", time.Now().Add(time.Minute))
	_, err2 := c.CooldownFor(ctx, "openai#tpm", time.Minute)
	_, err3 := c.Sync(ctx, "openai#tpm", 0)
	for i, err := range []error{err1, err2, err3} {
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("call %d: error %v, want one matching errors.ErrUnsupported", i, err)
		}
	}
	if after := tokens(t, c, "openai#tpm"); after != before {
		t.Errorf("openai#tpm holds %d millitokens after the unsupported calls, want %d as before", after, before)
	}
}
