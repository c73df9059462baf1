package pgstore

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/reconcile"
	"github.com/ontopix/sluice/store"
)

// faultRig is the fault suite's fleet: "processes" (each its own pool,
// store and sluice.Client, on its own URL) running workers that hold a slot
// of a concurrent bucket and tokens of a tokens bucket through
// WithSlotMany. The last process reaches the server directly and runs the
// reconciler; admin, on the same URL with a long timeout, sets up, reads
// the balances and checks the end state.
type faultRig struct {
	t        *testing.T
	admin    *Store
	stores   []*Store
	clients  []*sluice.Client
	holders  atomic.Int64    // callbacks running now
	maxHeld  atomic.Int64    // the most callbacks ever running at once
	granted  [2]atomic.Int64 // callbacks run, per process
	lastOK   [2]atomic.Int64 // wall time (UnixNano) of each process's latest grant
	failures sync.Map        // error kind → *atomic.Int64
}

const (
	faultSlots = "fault#concurrent"
	faultTPM   = "fault#tpm"
	faultCap   = 4
	faultTTL   = 2 * time.Second
	faultOpTO  = 500 * time.Millisecond
)

// newFaultRig builds one process per URL (two at most) on a fresh schema,
// each bounding its operations by opTimeout.
func newFaultRig(t *testing.T, opTimeout time.Duration, urls ...string) *faultRig {
	r := &faultRig{t: t}
	r.admin = newStoreOn(t, pgtest.PoolAt(t, urls[len(urls)-1], nil))
	for _, u := range urls {
		pool := pgtest.PoolAt(t, u, func(c *pgxpool.Config) { c.MaxConns = 6 })
		s, err := New(pool, WithSchema(r.admin.Schema()), WithTimeout(opTimeout))
		if err != nil {
			t.Fatal(err)
		}
		cfg := sluice.DefaultConfig()
		cfg.LeaseTTL = faultTTL
		cfg.OpTimeout = opTimeout
		cfg.DefaultSlotTimeout = time.Second // a wait ends after 1 s
		c, err := sluice.New(s, sluice.WithConfig(cfg), sluice.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		r.stores, r.clients = append(r.stores, s), append(r.clients, c)
	}
	ctx := context.Background()
	s := r.admin
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: store.Bucket{Name: faultSlots, Config: bucket.ConcurrentSlots(faultCap)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: store.Bucket{Name: faultTPM, Config: bucket.PerPeriod(bucket.Tokens, 1_000_000, time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// fail counts an error by kind.
func (r *faultRig) fail(err error) {
	kind := "other: " + err.Error()
	var timeout *sluice.SlotTimeoutError
	switch {
	case errors.Is(err, store.ErrUnavailable):
		kind = "ErrUnavailable"
	case errors.Is(err, sluice.ErrLeaseLost):
		kind = "ErrLeaseLost"
	case errors.Is(err, store.ErrLeaseExpired):
		kind = "ErrLeaseExpired"
	case errors.As(err, &timeout):
		kind = "slot timeout"
	case errors.Is(err, context.Canceled):
		return
	}
	n, _ := r.failures.LoadOrStore(kind, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

// direct is the store of the process that reaches the server directly.
func (r *faultRig) direct() *Store { return r.stores[len(r.stores)-1] }

// work runs one worker of process p until ctx ends: hold a slot and 10
// tokens, work a little, settle the tokens to 4.
func (r *faultRig) work(ctx context.Context, p int) {
	c := r.clients[p]
	reqs := []sluice.Request{{Dimension: faultSlots, Cost: 1}, {Dimension: faultTPM, Cost: 10}}
	for ctx.Err() == nil {
		err := c.WithSlotMany(ctx, reqs, func(fctx context.Context, l *sluice.Lease) error {
			n := r.holders.Add(1)
			defer r.holders.Add(-1)
			for m := r.maxHeld.Load(); n > m && !r.maxHeld.CompareAndSwap(m, n); m = r.maxHeld.Load() {
			}
			r.granted[p].Add(1)
			r.lastOK[p].Store(time.Now().UnixNano())
			select {
			case <-fctx.Done():
				return context.Cause(fctx)
			case <-time.After(10 * time.Millisecond): // the vendor call
			}
			_, err := l.Settle(fctx, faultTPM, 4)
			return err
		})
		if err != nil {
			r.fail(err)
			if errors.Is(err, store.ErrUnavailable) {
				time.Sleep(20 * time.Millisecond) // back off, as a caller would
			}
		}
	}
}

// balance reads, in one statement (one snapshot), the concurrent bucket's
// balance and the slots its lease records hold, in millitokens.
func (r *faultRig) balance(ctx context.Context) (tokens, held int64, err error) {
	sch := pgx.Identifier{r.admin.Schema()}.Sanitize()
	err = r.admin.pool.QueryRow(ctx, `SELECT b.tokens, coalesce((SELECT sum(l.costs[array_position(l.dims, b.name)]) FROM `+sch+
		`.leases l WHERE l.dims @> ARRAY[b.name]), 0) * 1000 FROM `+sch+`.buckets b WHERE b.name = $1`, faultSlots).Scan(&tokens, &held)
	return tokens, held, err
}

// monitor checks, whenever the server answers, that the concurrent
// bucket's balance plus what its records hold is exactly its capacity: a
// slot restored twice would raise it, one lost would lower it.
func (r *faultRig) monitor(ctx context.Context) {
	for ctx.Err() == nil {
		qctx, cancel := context.WithTimeout(ctx, faultOpTO)
		tokens, held, err := r.balance(qctx)
		cancel()
		if err == nil && tokens+held != faultCap*bucket.Milli {
			r.t.Errorf("balance %d + held %d millitokens != capacity %d", tokens, held, faultCap*bucket.Milli)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// recovered waits until a worker of process p is granted a slot after
// since and returns how long that took.
func (r *faultRig) recovered(p int, since time.Time) time.Duration {
	deadline := since.Add(30 * time.Second)
	for r.lastOK[p].Load() <= since.UnixNano() {
		if time.Now().After(deadline) {
			r.t.Fatalf("process %d: no grant within 30 s", p)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Duration(r.lastOK[p].Load() - since.UnixNano())
}

// start runs three workers per process, the reconciler (every 250 ms, on
// the direct process) and the balance monitor until stop is called.
func (r *faultRig) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for p := range r.clients {
		for range 3 {
			wg.Go(func() { r.work(ctx, p) })
		}
	}
	rec, err := reconcile.New(r.direct(), reconcile.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		r.t.Fatal(err)
	}
	wg.Go(func() { rec.Run(ctx, 250*time.Millisecond) })
	wg.Go(func() { r.monitor(ctx) })
	return func() { cancel(); wg.Wait() }
}

// finish checks the end of a run: never more callbacks at once than the
// capacity, and, one reconcile past the TTL after the load stopped, every
// slot back (no record left, balance == capacity, nothing capped).
func (r *faultRig) finish() {
	t := r.t
	ended := time.Now()
	if m := r.maxHeld.Load(); m > faultCap {
		t.Errorf("%d callbacks ran at once, capacity %d", m, faultCap)
	}
	r.failures.Range(func(k, v any) bool {
		t.Logf("errors seen by callers: %s × %d", k, v.(*atomic.Int64).Load())
		return true
	})
	t.Logf("callbacks run per process: %d, %d; at most %d at once", r.granted[0].Load(), r.granted[1].Load(), r.maxHeld.Load())
	// Every lease still recorded expires within the TTL (leases are renewed
	// only while a callback runs); one reconcile then returns its slot.
	bg := context.Background()
	leases, err := r.admin.Leases(bg, store.LeaseQuery{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lease records left when the load stopped: %d", len(leases))
	time.Sleep(time.Until(ended.Add(faultTTL + 100*time.Millisecond)))
	rec, err := reconcile.New(r.admin, reconcile.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := rec.RunOnce(bg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("final reconcile: %+v", rep)
	if rep.AlreadyCapped != 0 {
		t.Errorf("final reconcile capped %d restores: a slot came back twice", rep.AlreadyCapped)
	}
	tokens, held, err := r.balance(bg)
	if err != nil {
		t.Fatal(err)
	}
	if tokens != faultCap*bucket.Milli || held != 0 {
		t.Errorf("after TTL + one reconcile: balance %d, held %d millitokens; want %d, 0", tokens, held, faultCap*bucket.Milli)
	}
	if left, err := r.admin.Leases(bg, store.LeaseQuery{Now: time.Now()}); err != nil || len(left) != 0 {
		t.Errorf("after TTL + one reconcile: %d lease records left (%v)", len(left), err)
	}
}

// TestFaultsUnderLoad runs two processes' workers through WithSlotMany
// while the server is (a) killed with SIGKILL (postmaster and backends)
// and restarted, (b) frozen with SIGSTOP for three operation timeouts and
// continued, (c) restarted at once in immediate mode (SIGQUIT, as
// pg_ctl restart -m immediate). Throughout, no more callbacks than the
// concurrent bucket's capacity ever run at once, and in every state the
// server answers in, balance + slots held by records == capacity exactly.
// After the load stops, one reconcile past the TTL returns every slot: no
// lease record is left and the balance is the capacity. These assertions
// hold whether or not the client retries a failed release in the
// background; only how soon slots come back (logged) depends on it.
// Recovery times are logged for docs/reliability-pg.md. SLUICE_LONG=1 runs
// the three faults ten times over (about two minutes).
func TestFaultsUnderLoad(t *testing.T) {
	srv := ownServer(t)
	r := newFaultRig(t, faultOpTO, srv.URL, srv.URL)
	stop := r.start()
	settle := func() { time.Sleep(1500 * time.Millisecond) }
	settle()
	faults := []struct {
		name  string
		fault func() error
	}{
		{"kill -9 and restart", func() error {
			if err := srv.Crash(); err != nil {
				return err
			}
			time.Sleep(time.Second)
			return srv.Restart()
		}},
		{"SIGSTOP for 3 op timeouts, SIGCONT", func() error {
			if err := srv.Stop(); err != nil {
				return err
			}
			time.Sleep(3 * faultOpTO)
			return srv.Cont()
		}},
		{"immediate restart", func() error {
			if err := srv.Kill(); err != nil {
				return err
			}
			return srv.Restart()
		}},
	}
	rounds := 1
	if os.Getenv("SLUICE_LONG") != "" {
		rounds = 10
	}
	for i := range rounds * len(faults) {
		f := faults[i%len(faults)]
		start := time.Now()
		if err := f.fault(); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		back := time.Now()
		took := r.recovered(0, back)
		tokens, held, err := r.balance(context.Background())
		t.Logf("%s: fault lasted %v; first grant %v after the server was back; right after: balance %d, held %d millitokens (%v)",
			f.name, back.Sub(start).Round(time.Millisecond), took.Round(time.Millisecond), tokens, held, err)
		settle()
	}
	stop()
	r.finish()
}

// TestPartitionedClient cuts one process off the server (a proxy holds its
// traffic, as a network dropping packets would) for longer than the lease
// TTL while the other keeps working: the cut-off process's calls fail with
// store.ErrUnavailable within the operation timeout; the other process
// keeps being granted slots, including those the cut-off one held once the
// reconciler has reclaimed them; after the heal the cut-off process is
// granted again, and releasing a lease it held across the partition
// returns ErrLeaseExpired (reclaimed, nothing restored). The same invariants as TestFaultsUnderLoad hold.
func TestPartitionedClient(t *testing.T) {
	srv := ownServer(t)
	proxy, err := pgtest.NewProxy(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	r := newFaultRig(t, faultOpTO, proxy.URL, srv.URL)
	// A slot the cut-off process holds across the partition, renewed in the
	// background until the partition makes renewals fail.
	h, err := r.clients[0].Slot(context.Background(), faultSlots)
	if err != nil {
		t.Fatal(err)
	}
	stop := r.start()
	time.Sleep(1500 * time.Millisecond)
	cut := time.Now()
	before := r.granted[1].Load()
	proxy.Partition()
	time.Sleep(faultTTL + time.Second)
	cutFor := time.Since(cut)
	if r.granted[1].Load() == before {
		t.Errorf("the connected process was granted nothing during the partition")
	}
	afterCut := r.lastOK[0].Load() - cut.UnixNano()
	proxy.Heal()
	healed := time.Now()
	took := r.recovered(0, healed)
	t.Logf("partition of %v: the connected process ran %d callbacks meanwhile; the cut-off one's last grant came %v after the cut; first grant %v after the heal",
		cutFor.Round(time.Millisecond), r.granted[1].Load()-before, time.Duration(afterCut).Round(time.Millisecond), took.Round(time.Millisecond))
	// The held lease expired during the partition and was reclaimed: its
	// late release restores nothing and says so.
	if err := h.Release(context.Background()); !errors.Is(err, store.ErrLeaseExpired) {
		t.Errorf("release after the heal of a lease reclaimed during the partition: %v, want ErrLeaseExpired", err)
	} else {
		t.Logf("release after the heal: %v", err)
	}
	time.Sleep(time.Second)
	stop()
	r.finish()
}

// TestCrashedHolder is a process that dies between grant and release: it
// holds every slot, stops renewing (its context ends) and never releases.
// Another process waiting for a slot gets one once the leases expired and
// the reconciler ran: within TTL + one reconcile interval + one poll
// interval (bounded generously here; the figure is logged).
func TestCrashedHolder(t *testing.T) {
	r := newFaultRig(t, testTimeout, pgtest.URL())
	const every = 250 * time.Millisecond
	rctx, rstop := context.WithCancel(context.Background())
	defer rstop()
	rec, err := reconcile.New(r.direct(), reconcile.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	go rec.Run(rctx, every)
	c := r.clients[0]
	dead, die := context.WithCancel(context.Background())
	for range faultCap {
		if _, err := c.Slot(dead, faultSlots); err != nil {
			t.Fatal(err)
		}
	}
	die() // the process is gone: no renewal, no release
	crashed := time.Now()
	wctx, cancel := context.WithTimeout(context.Background(), 4*faultTTL)
	defer cancel()
	err = c.WithSlot(wctx, faultSlots, func(context.Context, *sluice.Lease) error { return nil })
	took := time.Since(crashed)
	if err != nil {
		t.Fatalf("no slot after the holder crashed: %v", err)
	}
	t.Logf("slot available again %v after the holder crashed (TTL %v, reconcile every %v, poll %v)",
		took.Round(time.Millisecond), faultTTL, every, store.DefaultPoll)
	if bound := 2 * (faultTTL + every + store.DefaultPoll); took > bound {
		t.Errorf("slot back after %v, beyond the generous bound %v", took, bound)
	}
	rstop()
	tokens, held, err := r.balance(context.Background())
	if err != nil || tokens+held != faultCap*bucket.Milli {
		t.Errorf("balance %d + held %d != capacity %d (%v)", tokens, held, faultCap*bucket.Milli, err)
	}
}
