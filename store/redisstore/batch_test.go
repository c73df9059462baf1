package redisstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// gateHook counts the round trips and commands that run scripts (not a new
// connection's handshake) and, while a gate is set, holds each of them
// before it is sent until the gate is closed.
type gateHook struct {
	trips, cmds, pipeEvals, maxPipe atomic.Int64
	held                            atomic.Int64 // commands held at the gate so far
	gate                            atomic.Pointer[chan struct{}]
	beforePipeline                  atomic.Pointer[func()] // run once, before the next pipeline is sent
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isScript(cmd) {
			return next(ctx, cmd)
		}
		h.trips.Add(1)
		h.cmds.Add(1)
		h.hold(1)
		return next(ctx, cmd)
	}
}
func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || !isScript(cmds[0]) {
			return next(ctx, cmds)
		}
		h.trips.Add(1)
		h.cmds.Add(int64(len(cmds)))
		for _, c := range cmds {
			if c.Name() == "eval" {
				h.pipeEvals.Add(1)
			}
		}
		for m := h.maxPipe.Load(); int64(len(cmds)) > m && !h.maxPipe.CompareAndSwap(m, int64(len(cmds))); m = h.maxPipe.Load() {
		}
		h.hold(len(cmds))
		if f := h.beforePipeline.Swap(nil); f != nil {
			(*f)()
		}
		return next(ctx, cmds)
	}
}

func isScript(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }

func (h *gateHook) hold(n int) {
	if g := h.gate.Load(); g != nil {
		h.held.Add(int64(n))
		<-*g
	}
}

// close sets a gate and returns the function that opens it.
func (h *gateHook) close() (open func()) {
	g := make(chan struct{})
	h.gate.Store(&g)
	var once sync.Once
	return func() { once.Do(func() { h.gate.Store(nil); close(g) }) }
}

// waitFor polls cond until it holds; the 20s bound only turns a hang into
// a failure.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func queued(s *Store) int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.q)
}

type outcome struct {
	res store.AcquireResult
	err error
}

// goAcquire starts an acquisition and returns where its outcome arrives.
func goAcquire(ctx context.Context, s *Store, items ...store.Item) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		var o outcome
		o.err = s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: items, ID: store.NewLeaseID(), TTL: time.Minute}, &o.res)
		ch <- o
	}()
	return ch
}

// stage holds the store busy deterministically: a first acquisition, sent
// by its caller (no other in progress), and one for each dispatcher, sent
// alone, are all held at the gate; then n more are started and waited for
// until they are all queued. The caller opens the gate.
func stage(t *testing.T, s *Store, h *gateHook, n int, items ...store.Item) (held, rest []<-chan outcome, open func()) {
	t.Helper()
	open = h.close()
	t.Cleanup(open)
	for i := range 1 + dispatchers {
		held = append(held, goAcquire(context.Background(), s, items...))
		waitFor(t, "an acquisition at the gate", func() bool { return h.held.Load() == int64(i+1) })
	}
	for range n {
		rest = append(rest, goAcquire(context.Background(), s, items...))
	}
	waitFor(t, "the queue", func() bool { return queued(s) == n })
	return held, rest, open
}

func collect(chs ...[]<-chan outcome) []outcome {
	var outs []outcome
	for _, l := range chs {
		for _, ch := range l {
			outs = append(outs, <-ch)
		}
	}
	return outs
}

// TestBatchedRoundTrips: with batching, serial acquisitions are still one
// command and one round trip each; N concurrent ones are N commands in at
// most N round trips (here, deterministically, 1 + dispatchers + 1: the
// caller's own, each dispatcher's first and one pipeline of the rest), with
// correct results.
func TestBatchedRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    func(testing.TB) redis.UniversalClient
	}{
		{"standalone", func(tb testing.TB) redis.UniversalClient { return newClient(tb) }},
		{"cluster", func(tb testing.TB) redis.UniversalClient { return newClusterClient(tb) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c(t)
			s := newStoreOn(t, c, WithBatching(64))
			put(t, s, t0, store.Bucket{Name: "b#rpm", Config: bucket.PerPeriod(bucket.Requests, 40, time.Minute)})
			put(t, s, t0, store.Bucket{Name: "b#concurrent", Config: bucket.ConcurrentSlots(1000)})
			put(t, s, t0, store.Bucket{Name: "b#serial", Config: bucket.PerPeriod(bucket.Requests, 1000, time.Minute)})
			acquire(t, s, t0, store.Item{Dimension: "b#serial"}) // loads the script
			h := &gateHook{}
			c.AddHook(h)
			for range 10 {
				acquire(t, s, t0, store.Item{Dimension: "b#serial"})
			}
			if trips, cmds := h.trips.Load(), h.cmds.Load(); trips != 10 || cmds != 10 {
				t.Fatalf("10 serial acquisitions: %d round trips, %d commands; want 10 and 10", trips, cmds)
			}
			h.trips.Store(0)
			h.cmds.Store(0)

			const n = 50
			items := []store.Item{{Dimension: "b#rpm"}, {Dimension: "b#concurrent"}}
			held, rest, open := stage(t, s, h, n-1-dispatchers, items...)
			open()
			outs := collect(held, rest)
			if trips, cmds := h.trips.Load(), h.cmds.Load(); trips > 2+dispatchers || cmds != n {
				t.Errorf("%d concurrent acquisitions: %d round trips, %d commands; want at most %d and %d", n, trips, cmds, 2+dispatchers, n)
			}
			if m := h.maxPipe.Load(); m != n-1-dispatchers {
				t.Errorf("largest pipeline %d commands, want %d", m, n-1-dispatchers)
			}
			var remaining []int64
			for _, o := range outs {
				switch {
				case o.err != nil:
					t.Fatal(o.err)
				case o.res.Granted:
					if !o.res.Recorded || len(o.res.Items) != 2 || o.res.Items[0].Dimension != "b#rpm" {
						t.Fatalf("grant: %+v", o.res)
					}
					remaining = append(remaining, o.res.Items[0].Remaining)
				case o.res.RetryIn <= 0 || len(o.res.Items) != 2:
					t.Fatalf("denial: %+v", o.res)
				}
			}
			slices.Sort(remaining)
			if len(remaining) != 40 || remaining[0] != 0 || remaining[39] != 39000 || slices.Compact(remaining)[39] != 39000 {
				t.Fatalf("grants left %v, want each of 0, 1000, …, 39000 once", remaining)
			}
			if ls, err := s.Leases(context.Background(), store.LeaseQuery{Now: t0}); err != nil || len(ls) != 40 {
				t.Fatalf("%d lease records, %v; want 40", len(ls), err)
			}
		})
	}
}

// TestBatchedCancel: a caller whose context is cancelled while its request
// is queued gets the context's error at once and its request is never sent;
// one cancelled while its request is in flight gets the error at once too
// (the script may still run, as when a reply is lost to a timeout); the
// others sharing the batcher are unaffected.
func TestBatchedCancel(t *testing.T) {
	c := newClient(t)
	s := newStoreOn(t, c, WithBatching(64))
	put(t, s, t0, store.Bucket{Name: "x#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	acquire(t, s, t0, store.Item{Dimension: "x#rpm"}) // loads the script; 9 left
	h := &gateHook{}
	c.AddHook(h)
	open := h.close()
	t.Cleanup(open)
	item := store.Item{Dimension: "x#rpm"}
	x := goAcquire(context.Background(), s, item)
	waitFor(t, "x at the gate", func() bool { return h.held.Load() == 1 })
	yCtx, cancelY := context.WithCancel(context.Background())
	y := goAcquire(yCtx, s, item)
	waitFor(t, "y at the gate", func() bool { return h.held.Load() == 2 })
	var others []<-chan outcome // one for each other dispatcher
	for i := range dispatchers - 1 {
		others = append(others, goAcquire(context.Background(), s, item))
		waitFor(t, "the other dispatchers busy", func() bool { return h.held.Load() == int64(3+i) })
	}
	aCtx, cancelA := context.WithCancel(context.Background())
	a := goAcquire(aCtx, s, item)
	b := goAcquire(context.Background(), s, item)
	cc := goAcquire(context.Background(), s, item)
	waitFor(t, "a, b and c queued", func() bool { return queued(s) == 3 })

	cancelA()
	cancelY()
	for name, ch := range map[string]<-chan outcome{"queued": a, "in flight": y} {
		o := <-ch // before the gate opens
		if !errors.Is(o.err, context.Canceled) || !errors.Is(o.err, store.ErrUnavailable) {
			t.Errorf("cancelled %s: %v, want ErrUnavailable wrapping context.Canceled", name, o.err)
		}
	}
	open()
	for _, ch := range append(others, x, b, cc) {
		if o := <-ch; o.err != nil || !o.res.Granted {
			t.Fatalf("uncancelled acquisition: %+v %v", o.res, o.err)
		}
	}
	sent := int64(4 + dispatchers - 1) // x, y, the others, b and c; not a
	if cmds := h.cmds.Load(); cmds != sent {
		t.Errorf("%d commands sent, want %d (the queued cancelled request is not sent)", cmds, sent)
	}
	// y's script runs although its caller gave up; its caller returned at
	// once, so the command may still be on its way: wait for it.
	waitFor(t, fmt.Sprintf("%d millitokens left", 1000*(9-sent)), func() bool {
		st, err := s.Peek(context.Background(), store.PeekRequest{Now: t0, Dimensions: []string{"x#rpm"}})
		return err == nil && st[0].Tokens == 1000*(9-sent)
	})
}

// TestBatchedScriptFlush: when the server has lost the script, a pipeline
// of EVALSHAs that all fail NOSCRIPT is re-sent as EVALs, on a standalone
// server and through a Cluster client.
func TestBatchedScriptFlush(t *testing.T) {
	for _, tc := range []struct {
		name  string
		c     func(testing.TB) redis.UniversalClient
		flush func(context.Context, redis.UniversalClient) error
	}{
		{"standalone", func(tb testing.TB) redis.UniversalClient { return newClient(tb) },
			func(ctx context.Context, c redis.UniversalClient) error { return c.ScriptFlush(ctx).Err() }},
		{"cluster", func(tb testing.TB) redis.UniversalClient { return newClusterClient(tb) },
			func(ctx context.Context, c redis.UniversalClient) error {
				return c.(*redis.ClusterClient).ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() })
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, other := tc.c(t), tc.c(t)
			s := newStoreOn(t, c, WithBatching(64))
			put(t, s, t0, store.Bucket{Name: "f#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)})
			acquire(t, s, t0, store.Item{Dimension: "f#rpm"}) // loads the script
			h := &gateHook{}
			c.AddHook(h)
			var flushErr error
			// The flush waits until the held single commands have finished:
			// one still in flight after it would reload the script with its
			// EVAL fallback and let the pipeline's EVALSHAs succeed.
			var heldDone sync.WaitGroup
			flush := func() { heldDone.Wait(); flushErr = tc.flush(context.Background(), other) }
			h.beforePipeline.Store(&flush)
			const n = 6
			held, rest, open := stage(t, s, h, n, store.Item{Dimension: "f#rpm"})
			for i, ch := range held {
				heldDone.Add(1)
				fwd := make(chan outcome, 1)
				go func(ch <-chan outcome) { o := <-ch; heldDone.Done(); fwd <- o }(ch)
				held[i] = fwd
			}
			open()
			outs := collect(held, rest)
			if flushErr != nil {
				t.Fatal(flushErr)
			}
			var remaining []int64
			for _, o := range outs {
				if o.err != nil || !o.res.Granted {
					t.Fatalf("after SCRIPT FLUSH: %+v %v", o.res, o.err)
				}
				remaining = append(remaining, o.res.Items[0].Remaining)
			}
			slices.Sort(remaining)
			if remaining[0] != 98000-1000*(n+dispatchers) || len(slices.Compact(remaining)) != n+1+dispatchers {
				t.Fatalf("remaining %v, want each of %d…98000 once", remaining, 98000-1000*(n+dispatchers))
			}
			if e := h.pipeEvals.Load(); e != n {
				t.Errorf("%d EVALs re-sent in a pipeline, want %d", e, n)
			}
		})
	}
}

// TestBatchedClose: Close answers the requests already queued, then stops
// the dispatcher; nothing of it is left running and later acquisitions
// fail with ErrClosed.
func TestBatchedClose(t *testing.T) {
	c := newClient(t)
	s := newStoreOn(t, c, WithBatching(64))
	put(t, s, t0, store.Bucket{Name: "c#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)})
	acquire(t, s, t0, store.Item{Dimension: "c#rpm"})
	h := &gateHook{}
	c.AddHook(h)
	held, rest, open := stage(t, s, h, 4, store.Item{Dimension: "c#rpm"})
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	waitFor(t, "Close to mark the batcher closed", func() bool {
		s.batch.mu.Lock()
		defer s.batch.mu.Unlock()
		return s.batch.closed
	})
	open()
	for _, o := range collect(held, rest) {
		if o.err != nil || !o.res.Granted {
			t.Fatalf("acquisition queued before Close: %+v %v", o.res, o.err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.batch.exited:
	default:
		t.Fatal("Close returned before the dispatcher")
	}
	buf := make([]byte, 1<<20)
	if st := string(buf[:runtime.Stack(buf, true)]); strings.Contains(st, "(*batcher).loop") {
		t.Fatalf("a dispatcher is still running after Close:\n%s", st)
	}
	var res store.AcquireResult
	err := s.Acquire(context.Background(), &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "c#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
	if !errors.Is(err, store.ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

// TestBatchingOption: WithBatching's sizes.
func TestBatchingOption(t *testing.T) {
	c := newClient(t)
	for _, tc := range []struct {
		n    int
		want int // 0: no batcher
	}{{0, DefaultMaxBatch}, {1, 0}, {2, 2}, {128, 128}} {
		s, err := New(c, WithBatching(tc.n))
		if err != nil {
			t.Fatal(err)
		}
		if got := 0; s.batch != nil {
			got = s.batch.max
			if got != tc.want {
				t.Errorf("WithBatching(%d): batches of %d, want %d", tc.n, got, tc.want)
			}
		} else if tc.want != 0 {
			t.Errorf("WithBatching(%d): no batching", tc.n)
		}
		s.Close()
	}
	if _, err := New(c, WithBatching(-1)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("WithBatching(-1): %v, want ErrInvalid", err)
	}
}
