package sluice_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/internal/testing/slotload"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// handOverClient returns a client over a counted store on backend, with
// "v#concurrent" of one slot and "v#tpm" on backend.
func handOverClient(t *testing.T, backend store.Store, opts ...sluice.Option) (*sluice.Client, *countingStore) {
	t.Helper()
	st := &countingStore{Forward: contract.Forward{Store: backend}}
	c, err := sluice.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, b := range []sluice.Bucket{
		{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)},
		{Name: "v#tpm", Config: sluice.PerMinute(sluice.Tokens, 60_000)},
	} {
		if err := c.PutBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	return c, st
}

// waitFor starts a Wait for reqs with opts and returns where its lease
// arrives (nil on an error, which fails the test).
func waitFor(t *testing.T, c *sluice.Client, reqs []sluice.Request, opts ...sluice.AcquireOption) <-chan *sluice.Lease {
	got := make(chan *sluice.Lease, 1)
	go func() {
		l, err := c.Wait(within(context.Background(), t, time.Minute), reqs, opts...)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	return got
}

var oneSlot = []sluice.Request{{Dimension: "v#concurrent", Cost: 1}}

// A release while a wait of the same client is first in line hands the
// lease over: the waiter gets it at once, under the same id, and the
// store sees no release nor acquisition, only the removal of the
// waiter's ticket. The slot is free once the last holder releases it,
// and no ticket is left behind.
func TestReleaseHandsTheSlotOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var handed atomic.Int64
		obs := &sluice.Observer{Acquired: func(_ context.Context, e sluice.AcquireEvent) {
			if e.HandedOver {
				handed.Add(1)
			}
		}}
		c, st := handOverClient(t, memstore.New(), sluice.WithObserver(obs))
		first, err := c.Wait(ctx, oneSlot)
		if err != nil {
			t.Fatal(err)
		}
		got := waitFor(t, c, oneSlot)
		synctest.Wait() // the waiter holds a ticket and sleeps
		time.Sleep(10 * time.Millisecond)
		acquires := st.acquires.Load()
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-got
		if next == nil {
			t.FailNow()
		}
		if next.ID() != first.ID() {
			t.Errorf("the waiter's lease is %s, want the released one, %s", next.ID(), first.ID())
		}
		if n := st.acquires.Load() - acquires; n != 0 {
			t.Errorf("%d acquisitions after the release, want 0", n)
		}
		if n := st.releases.Load(); n != 0 {
			t.Errorf("%d store releases, want 0", n)
		}
		if n := st.dequeues.Load(); n != 1 {
			t.Errorf("%d ticket removals, want 1", n)
		}
		if n := handed.Load(); n != 1 {
			t.Errorf("%d hand-overs observed, want 1", n)
		}
		if got, want := next.CreatedAt(), first.CreatedAt(); !got.Equal(want) {
			t.Errorf("handed lease's CreatedAt = %v, want %v (its TTL counts from the record's)", got, want)
		}
		if got, want := next.ExpiresAt(), first.ExpiresAt(); !got.Equal(want) {
			t.Errorf("handed lease's ExpiresAt = %v, want %v", got, want)
		}
		if err := first.Release(ctx); err != nil {
			t.Errorf("a second Release of the handed-over lease = %v, want nil", err)
		}
		if err := first.Extend(ctx, time.Minute); err == nil {
			t.Error("Extend of the handed-over lease succeeded; it is released")
		}
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := st.releases.Load(); n != 1 {
			t.Errorf("%d store releases after the last holder's, want 1", n)
		}
		res, err := c.Acquire(ctx, "v#concurrent")
		if err != nil || !res.Granted() {
			t.Errorf("one-shot Acquire after the last release = %v, %v; want GRANTED: no ticket is left", res.Outcome, err)
		}
	})
}

// A lease is handed over only to a wait for exactly its items, caller
// and TTL; a lease with time-based items, or whose renewals have failed
// for half its TTL, goes back through the store.
func TestHandOverOnlyForTheSameRequest(t *testing.T) {
	both := []sluice.Request{{Dimension: "v#concurrent", Cost: 1}, {Dimension: "v#tpm", Cost: 10}}
	for _, tt := range []struct {
		name       string
		held, wait []sluice.Request
		waitOpts   []sluice.AcquireOption
		age        time.Duration
		want       bool
	}{
		{name: "same", held: oneSlot, wait: oneSlot, want: true},
		{name: "other caller", held: oneSlot, wait: oneSlot, waitOpts: []sluice.AcquireOption{sluice.WithCaller("b")}},
		{name: "other TTL", held: oneSlot, wait: oneSlot, waitOpts: []sluice.AcquireOption{sluice.WithTTL(time.Hour)}},
		{name: "with tokens", held: both, wait: both},
		{name: "aged a tenth", held: oneSlot, wait: oneSlot, age: 7 * time.Second, want: true},
		{name: "aged half", held: oneSlot, wait: oneSlot, age: 31 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				c, st := handOverClient(t, memstore.New())
				held, err := c.Wait(ctx, tt.held)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(tt.age)
				got := waitFor(t, c, tt.wait, tt.waitOpts...)
				synctest.Wait()
				time.Sleep(10 * time.Millisecond)
				if err := held.Release(ctx); err != nil {
					t.Fatal(err)
				}
				next := <-got
				if next == nil {
					t.FailNow()
				}
				if got := next.ID() == held.ID(); got != tt.want {
					t.Errorf("handed over = %v, want %v", got, tt.want)
				}
				if got, want := st.releases.Load() == 0, tt.want; got != want {
					t.Errorf("released without the store = %v, want %v", got, want)
				}
				if tt.want && tt.age > 0 {
					// An aged lease is extended before the hand-over.
					if n := st.extends.Load(); n != 1 {
						t.Errorf("%d extensions, want 1", n)
					}
					if got, want := next.ExpiresAt(), time.Now().Add(time.Minute); got.Before(want.Add(-10 * time.Millisecond)) {
						t.Errorf("handed lease expires at %v, want about %v", got, want)
					}
				}
				_ = next.Release(ctx)
			})
		})
	}
}

// The hand-over keeps the order of the queue: a waiter of another process
// whose ticket is ahead gets the slot through the store, and a local
// waiter behind it gets it after.
func TestHandOverKeepsTheOrderOfTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		backend := memstore.New()
		c, st := handOverClient(t, backend)
		other, _ := handOverClient(t, backend)
		held, err := c.Wait(ctx, oneSlot)
		if err != nil {
			t.Fatal(err)
		}
		remote := waitFor(t, other, oneSlot)
		synctest.Wait()
		time.Sleep(10 * time.Millisecond)
		local := waitFor(t, c, oneSlot)
		synctest.Wait()
		time.Sleep(10 * time.Millisecond)
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := st.releases.Load(); n != 1 {
			t.Errorf("%d store releases, want 1: the waiter ahead is another process's", n)
		}
		l := <-remote
		select {
		case <-local:
			t.Fatal("the local waiter got the slot while the remote one, ahead of it, held it")
		default:
		}
		_ = l.Release(ctx)
		if l := <-local; l != nil {
			_ = l.Release(ctx)
		}
	})
}

// Two processes of 8 workers each on 8 slots with 20 ms holds: the
// hand-overs keep the slots busy and each process gets its share, as
// when every slot went through the store's queue.
func TestHandOverSharesTheSlotsBetweenProcesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backend := memstore.New()
		t.Cleanup(func() { backend.Close() })
		var clients []*sluice.Client
		var grants [2]atomic.Int64
		var handed atomic.Int64
		for i := range 2 {
			obs := &sluice.Observer{Acquired: func(_ context.Context, e sluice.AcquireEvent) {
				if e.Outcome == sluice.Granted {
					grants[i].Add(1)
				}
				if e.HandedOver {
					handed.Add(1)
				}
			}}
			c, err := sluice.New(backend, sluice.WithObserver(obs))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			clients = append(clients, c)
		}
		if err := clients[0].PutBucket(context.Background(), sluice.Bucket{Name: "load#concurrent", Config: sluice.ConcurrentLimit(8)}); err != nil {
			t.Fatal(err)
		}
		res := slotload.Run(context.Background(), slotload.Config{
			Clients: clients, Dimension: "load#concurrent", Slots: 8, Workers: 16,
			Hold: 20 * time.Millisecond, Window: 10 * time.Second,
		})
		if res.Errors > 0 {
			t.Fatalf("%d waits failed; first: %v", res.Errors, res.FirstErr)
		}
		a, b := grants[0].Load(), grants[1].Load()
		t.Logf("utilisation %.1f %%, grants %d / %d, %d handed over", 100*res.Utilisation, a, b, handed.Load())
		if res.Utilisation < 0.95 {
			t.Errorf("utilisation = %.1f %%, want at least 95 %%", 100*res.Utilisation)
		}
		if min(a, b) < (a+b)*2/5 {
			t.Errorf("grants %d and %d: one process got less than 40 %% of them", a, b)
		}
	})
}

// A hand-over under the race detector: many workers on a few slots,
// releasing and waiting at once, never hold more than the slots.
func TestHandOverNeverOverAdmits(t *testing.T) {
	c, _ := newSlotsClient(t, 3)
	var held, peak atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := c.Wait(ctx, []sluice.Request{{Dimension: "load#concurrent", Cost: 1}})
				if err != nil {
					continue
				}
				n := held.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(time.Millisecond)
				held.Add(-1)
				_ = l.Release(context.Background())
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 3 {
		t.Errorf("%d slots held at once, want at most 3", p)
	}
	if got := tokens(t, c, "load#concurrent") / 1000; got != 3 {
		t.Errorf("free slots after the run = %v, want 3", got)
	}
}

// gateStore blocks the queued acquisitions of one waiter, once armed,
// until the gate opens.
type gateStore struct {
	countingStore
	armed   atomic.Bool
	blocked chan struct{} // closed when a call blocks
	open    chan struct{}
}

func (s *gateStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	if req.Queue > 0 && s.armed.CompareAndSwap(true, false) {
		close(s.blocked)
		<-s.open
		if err := ctx.Err(); err != nil {
			return err // as a networked store's call would
		}
	}
	return s.countingStore.Acquire(ctx, req, res)
}

// newGateClient returns a client over a gateStore on a fresh memstore,
// with "v#concurrent" of slots slots.
func newGateClient(t *testing.T, slots int64) (*sluice.Client, *gateStore) {
	t.Helper()
	st := &gateStore{countingStore: countingStore{Forward: contract.Forward{Store: memstore.New()}}, blocked: make(chan struct{}), open: make(chan struct{})}
	c, err := sluice.New(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.PutBucket(context.Background(), sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(slots)}); err != nil {
		t.Fatal(err)
	}
	return c, st
}

// A lease handed to a waiter whose ask then fails because its context
// ended is passed on: the wait fails, and the slot is free.
func TestHandOverDuringAnAskThatFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newGateClient(t, 1)
		held, err := c.Wait(ctx, oneSlot)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() {
			l, err := c.Wait(wctx, oneSlot)
			if l != nil {
				_ = l.Release(ctx)
			}
			got <- err
		}()
		synctest.Wait()
		st.armed.Store(true)
		<-st.blocked // its next ask is in flight
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		close(st.open)
		if err := <-got; err == nil {
			t.Error("the wait whose context ended returned a lease, want its error")
		}
		synctest.Wait()
		if got := tokens(t, c, "v#concurrent") / 1000; got != 1 {
			t.Errorf("free slots = %d, want 1: the handed lease is passed on", got)
		}
	})
}

// A lease handed to a waiter while its ask is in flight reaches it when
// the ask returns; what the ask did is undone: a slot the store granted it
// meanwhile is released, and tickets it renewed are removed.
func TestHandOverDuringAnAsk(t *testing.T) {
	for _, granted := range []bool{false, true} {
		name := "denied"
		if granted {
			name = "granted"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				c, st := newGateClient(t, 2)
				a, err := c.Wait(ctx, oneSlot)
				if err != nil {
					t.Fatal(err)
				}
				b, err := c.Wait(ctx, oneSlot, sluice.WithCaller("b"))
				if err != nil {
					t.Fatal(err)
				}
				got := waitFor(t, c, oneSlot)
				synctest.Wait() // queued, asleep
				st.armed.Store(true)
				<-st.blocked // its next ask is in flight
				if err := a.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if granted {
					// Another caller's lease: released through the store, so
					// the ask in flight finds a free slot.
					if err := b.Release(ctx); err != nil {
						t.Fatal(err)
					}
				}
				close(st.open)
				l := <-got
				if l == nil {
					t.FailNow()
				}
				if l.ID() != a.ID() {
					t.Errorf("the waiter's lease is %s, want the handed one, %s", l.ID(), a.ID())
				}
				synctest.Wait()  // the undoing in the background
				want := int64(0) // a and the waiter's hold the 2 slots (b too when not released)
				if granted {
					want = 1
				}
				if got := tokens(t, c, "v#concurrent") / 1000; got != want {
					t.Errorf("free slots = %d, want %d", got, want)
				}
				_ = l.Release(ctx)
				if !granted {
					_ = b.Release(ctx)
				}
				// No ticket is left: both slots can be taken at once, by
				// acquisitions that a ticket taken in the same millisecond
				// might not precede.
				time.Sleep(time.Millisecond)
				for range 2 {
					res, err := c.Acquire(ctx, "v#concurrent", sluice.WithCaller("x"))
					if err != nil || !res.Granted() {
						t.Fatalf("Acquire after every release = %v, %v; want GRANTED", res.Outcome, err)
					}
				}
			})
		})
	}
}

// A wait that ends (its context cancelled) as a lease is handed to it
// either returns the lease or passes it on: the slot is never lost.
func TestHandOverToAWaitThatEnds(t *testing.T) {
	for i := range 20 {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			c, _ := handOverClient(t, memstore.New())
			held, err := c.Wait(ctx, oneSlot)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			type result struct {
				l   *sluice.Lease
				err error
			}
			got := make(chan result, 1)
			go func() {
				l, err := c.Wait(wctx, oneSlot)
				got <- result{l, err}
			}()
			synctest.Wait()
			cancel()
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.l != nil {
				_ = r.l.Release(ctx)
			}
			synctest.Wait()
			if got := tokens(t, c, "v#concurrent") / 1000; got != 1 {
				t.Fatalf("run %d: free slots after the wait ended (%v) = %d, want 1", i, r.err, got)
			}
		})
	}
}

// What a waiter learns of the other clients' tickets ahead of it on its
// dimensions says nothing of a waiter ahead of it that also waits on
// another dimension: a lease on both is not handed to that waiter over
// another client's waiter ahead of it there.
func TestHandOverKeepsTheOrderOnEveryDimension(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		backend := memstore.New()
		c, st := handOverClient(t, backend)
		other, _ := handOverClient(t, backend)
		for _, name := range []string{"a#concurrent", "b#concurrent"} {
			if err := c.PutBucket(ctx, sluice.Bucket{Name: name, Config: sluice.ConcurrentLimit(1)}); err != nil {
				t.Fatal(err)
			}
		}
		both := []sluice.Request{{Dimension: "a#concurrent", Cost: 1}, {Dimension: "b#concurrent", Cost: 1}}
		held, err := c.Wait(ctx, both)
		if err != nil {
			t.Fatal(err)
		}
		step := func() {
			synctest.Wait()
			time.Sleep(10 * time.Millisecond)
		}
		remote := waitFor(t, other, both[1:]) // first in line on b
		step()
		x := waitFor(t, c, both) // behind it on b, first on a
		step()
		y := waitFor(t, c, both[:1]) // behind x on a: nothing else ahead there
		step()
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := st.releases.Load(); n != 1 {
			t.Errorf("%d store releases, want 1: another client's waiter is ahead on b", n)
		}
		synctest.Wait()
		select {
		case l := <-x:
			t.Error("the waiter on both dimensions got them while another client's waiter, ahead of it on b, waited for b")
			if l != nil {
				_ = l.Release(ctx)
			}
			x = nil
		default:
		}
		// Every wait ends before the test does: each holder releases in
		// turn.
		for _, ch := range []<-chan *sluice.Lease{remote, x, y} {
			if ch == nil {
				continue
			}
			if l := <-ch; l != nil {
				_ = l.Release(ctx)
			}
		}
	})
}
