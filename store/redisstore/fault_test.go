package redisstore

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/store"
)

// faultCapacity is the concurrent bucket's capacity in the fault suite.
const faultCapacity = 4

// faultRun is the state the fault suite's callers share.
type faultRun struct {
	holders, peak          atomic.Int64 // callbacks holding a slot now, and the most at once
	granted, failed, other atomic.Int64
	replayed               atomic.Int64 // releases answered "already gone" (see worker)
}

// hold counts a holder in for the callback's duration and records the
// peak.
func (f *faultRun) hold(ctx context.Context, d time.Duration) {
	n := f.holders.Add(1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	f.holders.Add(-1)
}

// worker loops over WithSlotMany (a slot and 10 tokens) until stop; an
// outage shows as errors matching ErrUnavailable or slot timeouts, counted.
func (f *faultRun) worker(t *testing.T, c *sluice.Client, stop <-chan struct{}) {
	reqs := []sluice.Request{{Dimension: "fault#concurrent", Cost: 1}, {Dimension: "fault#tpm", Cost: 10}}
	for {
		select {
		case <-stop:
			return
		default:
		}
		err := c.WithSlotMany(context.Background(), reqs, func(ctx context.Context, _ *sluice.Lease) error {
			f.granted.Add(1)
			f.hold(ctx, 2*time.Millisecond)
			return nil
		})
		switch {
		case err == nil:
		case errors.Is(err, sluice.ErrUnavailable) || errors.Is(err, sluice.ErrSlotTimeout):
			f.failed.Add(1)
			time.Sleep(10 * time.Millisecond) // back off from a failing store
		case errors.Is(err, sluice.ErrLeaseExpired):
			// A release that found its lease already reclaimed (its
			// renewals failed through the outage). A release whose reply
			// the restarting server never sent no longer lands here:
			// go-redis sends it again and the op key answers "released".
			f.replayed.Add(1)
		default:
			f.other.Add(1)
			t.Logf("worker: %v", err)
		}
	}
}

// holder takes a slot with a SlotHandle and holds it for 400ms at a time,
// across outages (renewed in the background), until stop.
func (f *faultRun) holder(c *sluice.Client, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		h, err := c.Slot(context.Background(), "fault#concurrent", sluice.WithCost(1))
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		f.granted.Add(1)
		f.hold(h.Context(), 400*time.Millisecond)
		_ = h.Release(context.Background())
	}
}

// TestFaults runs callers through the public Client on two store handles
// ("processes", each with its own client) while a persistent redis-server
// (appendonly, appendfsync always) is SIGKILLed and restarted, SIGSTOPped
// for longer than the store's timeout and resumed, and restarted cleanly.
// Throughout, a counter of the callbacks holding a slot never exceeds the
// capacity, and every answer of the server satisfies balance + lease records
// = capacity. After the last fault, once the TTL has passed, one reconcile
// restores every slot abandoned by a failed release or an acquisition whose
// reply was lost: the balance is exactly the capacity, none lost, none
// restored twice. Each phase is bounded (about 10s in all); SLUICE_LONG=1
// repeats the three faults five times.
func TestFaults(t *testing.T) {
	srv, err := redistest.Start(redistest.Persistent...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	const ttl, timeout = 2 * time.Second, 300 * time.Millisecond
	prefix := uniquePrefix()
	var clients []*sluice.Client
	var stores []*Store
	for range 2 {
		rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { rc.Close() })
		s, err := New(rc, WithPrefix(prefix), WithTimeout(timeout)) // the server's clock
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		cfg := sluice.DefaultConfig()
		cfg.LeaseTTL = ttl
		cfg.OpTimeout = timeout
		cfg.DefaultSlotTimeout = 300 * time.Millisecond // a wait ends after 300 ms
		c, err := sluice.New(s, sluice.WithConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		stores, clients = append(stores, s), append(clients, c)
	}
	ctx := context.Background()
	put(t, stores[0], time.Now(), store.Bucket{Name: "fault#concurrent", Config: bucket.ConcurrentSlots(faultCapacity)})
	put(t, stores[0], time.Now(), store.Bucket{Name: "fault#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1_000_000, time.Minute)})

	f := &faultRun{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() { defer wg.Done(); f.worker(t, clients[i%2], stop) }()
	}
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); f.holder(clients[i], stop) }()
	}
	var samples, sampleErrs atomic.Int64
	wg.Add(1)
	go func() { // the invariants, and a reconciler as a fleet runs one
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if h := f.holders.Load(); h > faultCapacity {
				t.Errorf("%d callbacks hold a slot, capacity %d", h, faultCapacity)
			}
			st, err := stores[1].Peek(ctx, store.PeekRequest{Now: time.Now(), Dimensions: []string{"fault#concurrent"}})
			if err != nil {
				sampleErrs.Add(1)
				continue
			}
			samples.Add(1)
			if tok := st[0].Tokens; tok < 0 || tok/1000+int64(st[0].ActiveLeases) != faultCapacity {
				t.Errorf("sample: balance %d millitokens with %d lease records, capacity %d", tok, st[0].ActiveLeases, faultCapacity)
			}
			_, _ = stores[1].Reconcile(ctx, store.ReconcileRequest{Now: time.Now(), Limit: store.DefaultReconcileLimit})
		}
	}()

	rounds := 1
	if os.Getenv("SLUICE_LONG") != "" {
		rounds = 5
	}
	// recovered waits until callers are granted slots again after a fault
	// ended, logs how long it took (docs/reliability-redis.md) and fails
	// beyond the TTL plus a reconcile and a generous margin: a slot whose
	// release failed comes back only when its lease expires.
	recovered := func(what string) {
		t.Helper()
		start, before := time.Now(), f.granted.Load()
		for f.granted.Load() < before+faultCapacity {
			if time.Since(start) > ttl+2*time.Second {
				t.Errorf("%s: %d grants in %v", what, f.granted.Load()-before, time.Since(start))
				return
			}
			time.Sleep(5 * time.Millisecond) // polling the callers' progress
		}
		t.Logf("%s: %d grants again after %v (%d failed so far)", what, faultCapacity,
			time.Since(start).Round(10*time.Millisecond), f.failed.Load())
	}
	recovered("start")
	for range rounds {
		_ = srv.Kill() // SIGKILL
		time.Sleep(300 * time.Millisecond)
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		recovered("SIGKILL, restarted after 300ms")
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * timeout) // hung for longer than the timeout, less than the TTL
		if err := srv.Cont(); err != nil {
			t.Fatal(err)
		}
		recovered("SIGSTOP for 3x the timeout, SIGCONT")
		srv.Terminate() // a clean restart
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		recovered("clean restart")
	}
	close(stop)
	wg.Wait()
	if f.granted.Load() == 0 || f.failed.Load() == 0 || samples.Load() == 0 {
		t.Errorf("%d granted, %d failed, %d samples: the run exercised nothing", f.granted.Load(), f.failed.Load(), samples.Load())
	}
	if f.other.Load() > 0 {
		t.Errorf("%d callers failed with an error other than unavailable or slot timeout", f.other.Load())
	}
	// Slots abandoned during the faults (a release that failed, a grant
	// whose reply was lost) come back within the TTL plus one reconcile.
	time.Sleep(ttl + 100*time.Millisecond)
	rec, err := stores[0].Reconcile(ctx, store.ReconcileRequest{Now: time.Now(), Limit: store.DefaultReconcileLimit})
	if err != nil {
		t.Fatal(err)
	}
	st, err := stores[0].Peek(ctx, store.PeekRequest{Now: time.Now(), Dimensions: []string{"fault#concurrent"}})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Tokens != faultCapacity*1000 || st[0].ActiveLeases != 0 {
		t.Errorf("after TTL + one reconcile: balance %d millitokens, %d lease records; want %d and none",
			st[0].Tokens, st[0].ActiveLeases, faultCapacity*1000)
	}
	t.Logf("%d granted, %d failed (unavailable or slot timeout), %d releases of a reclaimed lease, peak %d holders of %d, %d samples (%d failed), final reconcile restored %d",
		f.granted.Load(), f.failed.Load(), f.replayed.Load(), f.peak.Load(), faultCapacity, samples.Load(), sampleErrs.Load(), rec.Restored)
}
