package sluice_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// countingStore counts the decision calls a wait makes, and the releases
// and extensions of leases.
type countingStore struct {
	contract.Forward
	acquires, reserves, cancels, dequeues atomic.Int64
	releases, extends                     atomic.Int64
	// queue is the longest ticket life an acquisition asked for.
	queue atomic.Int64
}

func (s *countingStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	s.acquires.Add(1)
	if q := int64(req.Queue); q > s.queue.Load() {
		s.queue.Store(q)
	}
	return s.Store.Acquire(ctx, req, res)
}

func (s *countingStore) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	s.reserves.Add(1)
	return s.Forward.Reserve(ctx, req, res)
}

func (s *countingStore) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	s.cancels.Add(1)
	return s.Forward.Cancel(ctx, req)
}

func (s *countingStore) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	s.releases.Add(1)
	return s.Store.Release(ctx, req)
}

func (s *countingStore) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	s.extends.Add(1)
	return s.Store.Extend(ctx, req)
}

func (s *countingStore) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	s.dequeues.Add(1)
	return s.Forward.Dequeue(ctx, req)
}

func (s *countingStore) calls() int64 {
	return s.acquires.Load() + s.reserves.Load() + s.cancels.Load() + s.dequeues.Load()
}

// newCountingClient returns a client on the bubble's clock over a counted
// memstore with the seed buckets and "bench#tpm" (1000 tokens a second,
// burst 6000).
func newCountingClient(t *testing.T, opts ...sluice.Option) (*sluice.Client, *countingStore) {
	t.Helper()
	st := &countingStore{Forward: contract.Forward{Store: memstore.New()}}
	t.Cleanup(func() { st.Close() })
	c, err := sluice.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	putSeedBuckets(t, c)
	b := sluice.Bucket{Name: "bench#tpm", Config: sluice.PerPeriod(sluice.Tokens, 1000, time.Second, sluice.Burst(6000))}
	if err := c.PutBucket(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return c, st
}

func drain(t *testing.T, c *sluice.Client, dim string, n int64) {
	t.Helper()
	res, err := c.Acquire(context.Background(), dim, sluice.WithCost(n))
	if err != nil || !res.Granted() {
		t.Fatalf("drain %s: %v, %v", dim, res.Outcome, err)
	}
}

func TestWaitFailsFastWhenTheWaitExceedsTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newCountingClient(t)
		drain(t, c, "openai#tpm", 10_000)
		before := st.calls()
		start := time.Now()
		_, err := c.Wait(within(ctx, t, 2*time.Second), []sluice.Request{{Dimension: "openai#tpm", Cost: 5_000}})
		var te *sluice.SlotTimeoutError
		if !errors.As(err, &te) {
			t.Fatalf("Wait = %v, want a *SlotTimeoutError", err)
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("Wait returned after %v; want at once (the store said 30s)", got)
		}
		if te.Attempts != 1 || te.RetryIn != 30*time.Second || st.calls()-before != 1 {
			t.Errorf("SlotTimeoutError = %+v after %d store calls; want 1 attempt, retry_in 30s, 1 call", te, st.calls()-before)
		}
		if got := tokens(t, c, "openai#tpm"); got != 0 {
			t.Errorf("balance = %d millitokens, want 0: a failed wait reserves nothing", got)
		}
	})
}

func TestWaitFailsFastOnTheContextDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCountingClient(t)
		drain(t, c, "openai#rpm", 100)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		// Two requests take 1.2 s at 100/min: longer than the context allows.
		_, err := c.Wait(ctx, []sluice.Request{{Dimension: "openai#rpm", Cost: 2}})
		if !errors.Is(err, sluice.ErrSlotTimeout) || time.Since(start) != 0 {
			t.Fatalf("Wait = %v after %v; want a slot timeout at once", err, time.Since(start))
		}
	})
}

func TestWaitSleepsUntilTheValidInstantWithOneStoreCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newCountingClient(t, config(leaseTTL(10*time.Second)))
		drain(t, c, "openai#rpm", 100)
		before := st.calls()
		start := time.Now()
		l, err := c.Wait(within(ctx, t, 5*time.Second), []sluice.Request{{Dimension: "openai#rpm", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := time.Since(start), 600*time.Millisecond; got != want {
			t.Errorf("Wait returned after %v, want %v (one token at 100/min)", got, want)
		}
		if got := st.calls() - before; got != 1 {
			t.Errorf("%d store calls, want 1", got)
		}
		if got, want := l.CreatedAt(), start.Add(600*time.Millisecond); !got.Equal(want) {
			t.Errorf("CreatedAt = %v, want the valid instant %v", got, want)
		}
		if got, want := l.ExpiresAt(), start.Add(600*time.Millisecond+10*time.Second); !got.Equal(want) {
			t.Errorf("ExpiresAt = %v, want the valid instant plus the TTL %v", got, want)
		}
	})
}

// A large request that arrives first is served first: small requests that
// arrive later queue behind its reservation instead of taking what
// refills.
func TestWaitServesALargeRequestBeforeLaterSmallOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, _ := newCountingClient(t)
		drain(t, c, "bench#tpm", 6000)
		var mu sync.Mutex
		var order []int64
		var wg sync.WaitGroup
		wait := func(cost int64) {
			l, err := c.Wait(within(ctx, t, 30*time.Second), []sluice.Request{{Dimension: "bench#tpm", Cost: cost}})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, cost)
			mu.Unlock()
			_ = l.Release(ctx)
		}
		wg.Go(func() { wait(5000) })
		synctest.Wait()
		for range 5 {
			time.Sleep(time.Millisecond)
			wg.Go(func() { wait(200) })
			synctest.Wait()
		}
		wg.Wait()
		if len(order) != 6 || order[0] != 5000 {
			t.Errorf("served %v; want the 5000-token request first", order)
		}
	})
}

func TestWaitCancelsTheReservationWhenTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st := newCountingClient(t)
		drain(t, c, "bench#tpm", 6000)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		_, err := c.Wait(within(ctx, t, 30*time.Second), []sluice.Request{{Dimension: "bench#tpm", Cost: 5000}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
		if st.cancels.Load() != 1 {
			t.Errorf("%d cancellations, want 1", st.cancels.Load())
		}
		// One second refilled 1000 tokens; the 5000 reserved came back.
		if got, want := tokens(t, c, "bench#tpm"), int64(1000*bucket.Milli); got != want {
			t.Errorf("balance = %d millitokens, want %d", got, want)
		}
	})
}

func TestWaitWithPollingKeepsPolling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		for _, tc := range []struct {
			name string
			opts []sluice.Option
			call []sluice.AcquireOption
		}{
			{name: "WithPolling", call: []sluice.AcquireOption{sluice.WithPolling()}},
		} {
			c, st := newCountingClient(t, tc.opts...)
			drain(t, c, "openai#tpm", 10_000)
			start := time.Now()
			_, err := c.Wait(within(ctx, t, 2*time.Second), []sluice.Request{{Dimension: "openai#tpm", Cost: 5_000}}, tc.call...)
			var te *sluice.SlotTimeoutError
			// It sleeps to the deadline and asks nothing then.
			if !errors.As(err, &te) || te.Attempts != 1 || time.Since(start) != 2*time.Second || st.reserves.Load() != 0 {
				t.Errorf("%s: Wait = %v after %v, %d reservations; want a timeout after 1 attempt, 2s, no reservation",
					tc.name, err, time.Since(start), st.reserves.Load())
			}
			// The context's deadline ended the wait: the error says so too.
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: Wait = %v, want an error matching context.DeadlineExceeded as well", tc.name, err)
			}
		}
	})
}

// Without a deadline on the context, Config.DefaultSlotTimeout bounds the
// wait, by the client's clock: a wait longer than it fails at once, and a
// polling wait ends once the client's clock has passed it.
func TestWaitWithoutADeadlineEndsAtTheDefaultSlotTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, _ := newCountingClient(t, config(slotTimeout(2*time.Second)))
		drain(t, c, "openai#tpm", 10_000)
		start := time.Now()
		_, err := c.Wait(ctx, []sluice.Request{{Dimension: "openai#tpm", Cost: 5_000}})
		var te *sluice.SlotTimeoutError
		if !errors.As(err, &te) || te.Timeout != 2*time.Second || te.Attempts != 1 || time.Since(start) != 0 {
			t.Errorf("Wait = %v after %v; want a timeout of 2s after 1 attempt, at once", err, time.Since(start))
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait = %v matches context.DeadlineExceeded; the context has no deadline", err)
		}
		_, err = c.Wait(ctx, []sluice.Request{{Dimension: "openai#tpm", Cost: 5_000}}, sluice.WithPolling())
		if !errors.As(err, &te) || te.Timeout != 2*time.Second || time.Since(start) != 2*time.Second {
			t.Errorf("polling Wait = %v after %v; want a timeout of 2s after 2s", err, time.Since(start))
		}
	})
}

// A waiter in the queue of a concurrent dimension is served before a
// one-shot acquisition that comes after it, even when that one asks first
// once the slot is free.
func TestWaitQueuesForAConcurrentSlotFirstComeFirstServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newCountingClient(t)
		const dim = "elevenlabs#concurrent"
		held := make([]*sluice.Lease, 2)
		for i := range held {
			res, err := c.Acquire(ctx, dim)
			if err != nil || !res.Granted() {
				t.Fatal(res.Outcome, err)
			}
			held[i] = res.Lease
		}
		got := make(chan *sluice.Lease, 1)
		go func() {
			// Another caller: the release below goes through the store
			// rather than handing the lease over.
			l, err := c.Wait(within(ctx, t, time.Minute), []sluice.Request{{Dimension: dim, Cost: 1}}, sluice.WithCaller("waiter"))
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		synctest.Wait() // the waiter holds a ticket and sleeps
		// Tickets taken in the same millisecond are ordered by id: come
		// strictly later.
		time.Sleep(time.Millisecond)
		if err := held[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := c.Acquire(ctx, dim)
		if err != nil || res.Granted() {
			t.Fatalf("one-shot Acquire after the release = %v, %v; want RETRY_IN: the waiter is ahead", res.Outcome, err)
		}
		l := <-got
		if l == nil {
			t.Fatal("the waiter got no slot")
		}
		if n := st.dequeues.Load(); n != 0 {
			t.Errorf("%d dequeues after a grant, want 0 (the grant removes the ticket)", n)
		}
		_ = l.Release(ctx)
		_ = held[1].Release(ctx)
	})
}

// A waiter that gives up removes its ticket at once: the slot it waited
// for is free for the next caller, not held until the ticket expires.
func TestWaitRemovesItsTicketWhenItGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st := newCountingClient(t)
		const dim = "elevenlabs#concurrent"
		bg := context.Background()
		var held []*sluice.Lease
		for range 2 {
			res, err := c.Acquire(bg, dim)
			if err != nil || !res.Granted() {
				t.Fatal(res.Outcome, err)
			}
			held = append(held, res.Lease)
		}
		ctx, cancel := context.WithCancel(bg)
		done := make(chan error)
		go func() {
			_, err := c.Wait(within(ctx, t, time.Minute), []sluice.Request{{Dimension: dim, Cost: 1}})
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
		if st.dequeues.Load() != 1 {
			t.Errorf("%d dequeues, want 1", st.dequeues.Load())
		}
		if err := held[0].Release(bg); err != nil {
			t.Fatal(err)
		}
		if res, err := c.Acquire(bg, dim); err != nil || !res.Granted() {
			t.Errorf("Acquire after the waiter gave up = %v, %v; want GRANTED", res.Outcome, err)
		}
	})
}

// A request on a concurrent and a tokens dimension, at the head of the
// queue with the slot free, fails fast when the tokens' wait is longer
// than the timeout, and holds no slot meanwhile.
func TestWaitMixedFailsFastAtTheHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, _ := newCountingClient(t)
		drain(t, c, "openai#tpm", 10_000)
		start := time.Now()
		_, err := c.Wait(within(ctx, t, 2*time.Second), []sluice.Request{{Dimension: "elevenlabs#concurrent", Cost: 1}, {Dimension: "openai#tpm", Cost: 5_000}})
		var te *sluice.SlotTimeoutError
		if !errors.As(err, &te) || te.Attempts != 1 || time.Since(start) != 0 {
			t.Fatalf("Wait = %v after %v; want a slot timeout at once", err, time.Since(start))
		}
		s, err := c.GetBucket(ctx, "elevenlabs#concurrent")
		if err != nil || s.Tokens != 2*bucket.Milli {
			t.Errorf("concurrent bucket = %v, %v; want both slots free", s.Tokens, err)
		}
	})
}

// A mixed request at the head of the queue waits for its tokens without
// holding the slot, then takes both at once.
func TestWaitMixedTakesEverythingOnceTheTokensRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, _ := newCountingClient(t)
		drain(t, c, "openai#rpm", 100)
		start := time.Now()
		l, err := c.Wait(within(ctx, t, 5*time.Second), []sluice.Request{{Dimension: "elevenlabs#concurrent", Cost: 1}, {Dimension: "openai#rpm", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < 600*time.Millisecond {
			t.Errorf("granted after %v, before the token refilled (600ms)", waited)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// noReserveStore is a store that claims store.Queuer but answers every
// reservation with errors.ErrUnsupported, as a wrapper over a store
// without reservations does.
type noReserveStore struct{ contract.Forward }

func (noReserveStore) Reserve(context.Context, *store.ReserveRequest, *store.ReserveResult) error {
	return errors.ErrUnsupported
}

func TestWaitPollsOnAStoreWithoutReservations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := noReserveStore{contract.Forward{Store: memstore.New()}}
		c, err := sluice.New(st)
		if err != nil {
			t.Fatal(err)
		}
		putSeedBuckets(t, c)
		drain(t, c, "openai#rpm", 100)
		for range 2 {
			l, err := c.Wait(within(ctx, t, 5*time.Second), []sluice.Request{{Dimension: "openai#rpm", Cost: 1}})
			if err != nil {
				t.Fatal(err)
			}
			_ = l.Release(ctx)
		}
	})
}

// A reserved slot's lease counts its TTL, and its renewals, from the
// valid instant.
func TestWithSlotRenewsAReservationFromItsValidInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, _ := newCountingClient(t, config(leaseTTL(3*time.Second)))
		drain(t, c, "openai#rpm", 100)
		start := time.Now()
		valid := start.Add(600 * time.Millisecond)
		err := c.WithSlot(within(ctx, t, 5*time.Second), "openai#rpm", func(ctx context.Context, l *sluice.Lease) error {
			if got, want := l.ExpiresAt(), valid.Add(3*time.Second); !got.Equal(want) {
				t.Errorf("ExpiresAt = %v, want %v", got, want)
			}
			time.Sleep(time.Second) // the first renewal, a third of the TTL after the valid instant
			synctest.Wait()
			if got, want := l.ExpiresAt(), valid.Add(time.Second+3*time.Second); !got.Equal(want) {
				t.Errorf("after the first renewal ExpiresAt = %v, want %v", got, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// A waiter's ticket lives no longer than a lease: a waiter cut off from the
// store (or crashed) must not block the queue longer than a holder cut off
// the same way keeps its slot.
func TestWaitTicketLivesNoLongerThanALease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st := newCountingClient(t, config(leaseTTL(2*time.Second))) // poll interval 1 s: three of them is 3 s
		ctx := context.Background()
		const dim = "elevenlabs#concurrent"
		var held []*sluice.Lease
		for {
			res, err := c.Acquire(ctx, dim)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Granted() {
				break
			}
			held = append(held, res.Lease)
		}
		wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		if _, err := c.Wait(wctx, []sluice.Request{{Dimension: dim, Cost: 1}}); err == nil {
			t.Fatal("the waiter got a slot; every slot is held")
		}
		if got, want := time.Duration(st.queue.Load()), 2*time.Second; got <= 0 || got > want {
			t.Errorf("ticket life asked for = %v, want at most the lease TTL %v", got, want)
		}
		for _, l := range held {
			_ = l.Release(ctx)
		}
	})
}
