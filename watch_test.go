package sluice_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/internal/testing/slotload"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// plainStore hides the store's notices (store.FreedWatcher) and
// store.InProcess, keeping the operations of the contract: its waiters
// poll the store.
type plainStore struct{ contract.Forward }

// noticeStore is a store whose notices of freed units the test sends by
// hand (store.FreedWatcher).
type noticeStore struct {
	contract.Forward
	notices  chan string
	watching chan struct{} // closed when the first watch starts
	returned chan struct{} // closed when that watch returns
}

func newNoticeStore(st store.Store) *noticeStore {
	return &noticeStore{Forward: contract.Forward{Store: st}, notices: make(chan string), watching: make(chan struct{}), returned: make(chan struct{})}
}

func (s *noticeStore) WatchFreed(ctx context.Context, freed func(string)) error {
	close(s.watching)
	defer close(s.returned)
	for {
		select {
		case d := <-s.notices:
			freed(d)
		case <-ctx.Done():
			return nil
		}
	}
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A notice that a slot was freed elsewhere wakes a waiter in line at once,
// without waiting for its next poll; the client watches only once it has a
// waiter, and stops watching when it is closed, or a poll interval after
// its last waiter left.
func TestFreedNoticeWakesAWaiter(t *testing.T) {
	for _, stop := range []string{"close", "idle"} {
		t.Run(stop, func(t *testing.T) { testFreedNoticeWakesAWaiter(t, stop) })
	}
}

func testFreedNoticeWakesAWaiter(t *testing.T, stop string) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memstore.New()
		defer mem.Close()
		ns := newNoticeStore(mem)
		waiter, err := sluice.New(ns)
		if err != nil {
			t.Fatal(err)
		}
		holder, err := sluice.New(plainStore{contract.Forward{Store: mem}})
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		held, err := holder.Wait(within(ctx, t, time.Minute), []sluice.Request{{Dimension: "v#concurrent", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if closed(ns.watching) {
			t.Fatal("the client watches before it has a waiter")
		}
		got := make(chan error, 1)
		go func() {
			l, err := waiter.Wait(within(ctx, t, time.Minute), []sluice.Request{{Dimension: "v#concurrent", Cost: 1}})
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		synctest.Wait()
		if !closed(ns.watching) {
			t.Fatal("a waiter in line did not start the watch")
		}
		if err := held.Release(ctx); err != nil { // in another client: no local wake-up
			t.Fatal(err)
		}
		synctest.Wait()
		start := time.Now()
		ns.notices <- "v#concurrent"
		synctest.Wait()
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("the notice did not wake the waiter")
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("granted %s after the notice, want at once", d)
		}
		if stop == "idle" {
			time.Sleep(waiter.Config().PollInterval - time.Millisecond)
			synctest.Wait()
			if closed(ns.returned) {
				t.Fatal("the watch stopped before a poll interval without waiters")
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if !closed(ns.returned) {
				t.Fatal("the watch still runs a poll interval after the last waiter left")
			}
		}
		if err := waiter.Close(); err != nil {
			t.Fatal(err)
		}
		if !closed(ns.returned) {
			t.Error("the watch still runs after Close")
		}
		if err := waiter.Close(); err != nil { // idempotent
			t.Fatal(err)
		}
	})
}

// A notice of a freed slot wakes only the waiter whose turn it is, not
// the oldest waiter of every client: of two clients waiting in line on
// one slot, the second in line lets the first notice pass and asks at the
// second, so each release costs the store one acquisition.
func TestFreedNoticeWakesTheFrontOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memstore.New()
		defer mem.Close()
		count := &countingStore{Forward: contract.Forward{Store: mem}}
		holder, err := sluice.New(plainStore{contract.Forward{Store: mem}})
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		held, err := holder.Wait(within(ctx, t, time.Minute), []sluice.Request{{Dimension: "v#concurrent", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		var stores []*noticeStore
		leases := make(chan *sluice.Lease, 2)
		for range 2 { // the first in line, then the second
			ns := newNoticeStore(count)
			c, err := sluice.New(ns)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			stores = append(stores, ns)
			go func() {
				l, err := c.Wait(within(ctx, t, time.Minute), []sluice.Request{{Dimension: "v#concurrent", Cost: 1}})
				if err != nil {
					t.Error(err)
				}
				leases <- l
			}()
			synctest.Wait()
			time.Sleep(time.Millisecond) // the next ticket is a millisecond later
		}
		for turn := range 2 {
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			before := count.acquires.Load()
			for _, ns := range stores {
				ns.notices <- "v#concurrent"
			}
			synctest.Wait()
			select {
			case held = <-leases:
			default:
				t.Fatalf("turn %d: the notice woke nobody who could take the slot", turn)
			}
			if got := count.acquires.Load() - before; got != 1 {
				t.Errorf("turn %d: a release cost %d acquisitions, want 1", turn, got)
			}
		}
	})
}

// Waiting in line keeps every slot busy across clients sharing one store,
// as within one: 4 clients, 16 workers on 8 slots, each holding its slot
// 20 ms or 1 s, use at least 95 % of the slot-time. A release in one
// client reaches the others' waiters through the store's notices.
func TestWaitInLineAcrossClientsUsesTheSlots(t *testing.T) {
	for _, hold := range []time.Duration{20 * time.Millisecond, time.Second} {
		t.Run(hold.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memstore.New()
				defer mem.Close()
				var cs []*sluice.Client
				for range 4 {
					c, err := sluice.New(mem)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					cs = append(cs, c)
				}
				if err := cs[0].PutBucket(context.Background(), sluice.Bucket{Name: "load#concurrent", Config: sluice.ConcurrentLimit(8)}); err != nil {
					t.Fatal(err)
				}
				res := slotload.Run(context.Background(), slotload.Config{
					Clients: cs, Dimension: "load#concurrent", Slots: 8, Workers: 16,
					Hold: hold, Window: 40 * hold,
				})
				if res.Errors > 0 {
					t.Fatalf("%d waits failed; first: %v", res.Errors, res.FirstErr)
				}
				t.Logf("hold %v: utilisation %.1f %%, %d grants", hold, 100*res.Utilisation, res.Grants)
				if res.Utilisation < 0.95 {
					t.Errorf("utilisation = %.1f %%, want at least 95 %%", 100*res.Utilisation)
				}
			})
		})
	}
}
