package sluice_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// A concurrent bucket's capacity lowered from 2 to 1 while 2 slots are
// held leaves the holders over the limit until one releases. A release
// while a wait of the same client is in line then gives the slot back to
// the store, as the waiter's last answer showed the bucket over its
// capacity: the lease is not handed on, which would keep the process over
// the new limit for as long as it has waiters.
func TestHandOverNotPastALoweredCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := handOverClient(t, memstore.New())
		if err := c.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(2)}); err != nil {
			t.Fatal(err)
		}
		a, err := c.Wait(ctx, oneSlot)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Wait(ctx, oneSlot)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		got := waitFor(t, c, oneSlot)
		synctest.Wait()
		time.Sleep(10 * time.Millisecond)
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		select {
		case l := <-got:
			t.Errorf("a waiter got lease %s (the released one: %v) while b holds the limit of 1; balance %d millislots, %d store releases",
				l.ID(), l.ID() == a.ID(), tokens(t, c, "v#concurrent"), st.releases.Load())
			_ = l.Release(ctx)
		default:
			if n := st.releases.Load(); n != 1 {
				t.Errorf("%d store releases, want 1", n)
			}
			if err := b.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l := <-got // served by the store once b gave its slot back
			if free := tokens(t, c, "v#concurrent"); free != 0 {
				t.Errorf("balance %d millislots with the waiter holding the only slot, want 0", free)
			}
			_ = l.Release(ctx)
		}
	})
}

// A lease is handed on only within one TTL of its grant by the store: a
// chain of hand-overs never outlives what the store last confirmed by
// more than that, even where no answer shows it wrong (a bucket deleted
// and created again, whose new slots the old lease does not count
// against).
func TestHandOverChainEndsAfterATTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := handOverClient(t, memstore.New())
		a, err := c.Wait(ctx, oneSlot, sluice.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.DeleteBucket(ctx, "v#concurrent"); err != nil {
			t.Fatal(err)
		}
		if err := c.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		fresh, err := c.Acquire(ctx, "v#concurrent", sluice.WithTTL(time.Hour))
		if err != nil || !fresh.Granted() {
			t.Fatalf("acquire on the new bucket: %v %v", fresh.Outcome, err)
		}
		holder := a
		for round := 0; ; round++ {
			got := waitFor(t, c, oneSlot, sluice.WithTTL(time.Minute))
			synctest.Wait()
			time.Sleep(20 * time.Second) // each holder keeps the slot a third of a TTL, renewing it
			if err := holder.Extend(ctx, time.Minute); err != nil {
				t.Fatalf("round %d: extend: %v", round, err)
			}
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			select {
			case l := <-got:
				if round >= 3 {
					t.Fatalf("round %d: the old bucket's lease is still handed on %v after its grant", round, time.Duration(round+1)*20*time.Second)
				}
				holder = l
				continue
			default:
			}
			if n := st.releases.Load(); n != 1 {
				t.Errorf("%d store releases, want 1", n)
			}
			_ = fresh.Lease.Release(ctx)
			l := <-got
			_ = l.Release(ctx)
			return
		}
	})
}

// contendedStore answers the next n queued acquisitions with
// store.ErrContention, as an optimistic store does when it loses a race.
type contendedStore struct {
	countingStore
	n atomic.Int64
}

func (s *contendedStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	if req.Queue > 0 && s.n.Add(-1) >= 0 {
		return store.ErrContention
	}
	return s.countingStore.Acquire(ctx, req, res)
}

// An ask that ends in contention (the store answered nothing about the
// line) tells a waiter nothing about the tickets ahead of it: a release
// here must not hand it the slot while another process's waiter is ahead.
func TestContentionTellsNothingOfTheLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		backend := memstore.New()
		st := &contendedStore{countingStore: countingStore{Forward: contract.Forward{Store: backend}}}
		c, err := sluice.New(st)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		other, _ := handOverClient(t, backend)
		held, err := c.Wait(ctx, oneSlot)
		if err != nil {
			t.Fatal(err)
		}
		remote := waitFor(t, other, oneSlot) // another process's waiter, first in line
		synctest.Wait()
		time.Sleep(10 * time.Millisecond)
		st.n.Store(4) // the local waiter's first ask: 1 + MaxRetries contended attempts
		local := waitFor(t, c, oneSlot)
		synctest.Wait()
		time.Sleep(2 * time.Second) // it asks again and is denied behind the remote waiter
		synctest.Wait()
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := st.releases.Load(); n != 1 {
			t.Errorf("%d store releases, want 1: the waiter ahead is another process's", n)
		}
		select {
		case l := <-local:
			t.Errorf("the local waiter was handed the slot (the released lease: %v) while another process's waiter was ahead of it", l.ID() == held.ID())
			_ = l.Release(ctx)
			if l := <-remote; l != nil {
				_ = l.Release(ctx)
			}
		case l := <-remote:
			_ = l.Release(ctx)
			if l := <-local; l != nil {
				_ = l.Release(ctx)
			}
		}
	})
}
