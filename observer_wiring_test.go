package sluice_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// recorder collects every observer event.
type recorder struct {
	mu       sync.Mutex
	acquired []sluice.AcquireEvent
	waited   []sluice.WaitEvent
	settled  []sluice.SettleEvent
	penalty  []sluice.PenaltyEvent
	cooled   []sluice.CooldownEvent
	synced   []sluice.SyncEvent
	released []sluice.ReleaseEvent
	lost     []sluice.LeaseLostEvent
	recon    []sluice.ReconcileEvent
	errs     []sluice.StoreErrorEvent
}

func add[E any](r *recorder, dst *[]E) func(context.Context, E) {
	return func(_ context.Context, e E) {
		r.mu.Lock()
		defer r.mu.Unlock()
		*dst = append(*dst, e)
	}
}

func (r *recorder) observer() *sluice.Observer {
	return &sluice.Observer{
		Acquired: add(r, &r.acquired), Waited: add(r, &r.waited), Settled: add(r, &r.settled),
		Penalized: add(r, &r.penalty), Cooled: add(r, &r.cooled), Synced: add(r, &r.synced), Released: add(r, &r.released), LeaseLost: add(r, &r.lost),
		Reconciled: add(r, &r.recon), StoreError: add(r, &r.errs),
	}
}

func TestObserverAcquireAndWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var rec recorder
		c, clk, _ := newClient(t, sluice.WithObserver(rec.observer()))
		if _, err := c.Acquire(ctx, "openai#rpm", sluice.WithCost(100)); err != nil {
			t.Fatal(err)
		}
		// The bucket is empty: a polling Wait retries until the refill
		// (the test clock is moved by a goroutine while Wait sleeps).
		go func() {
			time.Sleep(time.Second)
			clk.Advance(time.Minute)
		}()
		l, err := c.Wait(within(ctx, t, 10*time.Minute), []sluice.Request{{Dimension: "openai#rpm", Cost: 1}}, sluice.WithPolling())
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if len(rec.acquired) < 3 {
			t.Fatalf("got %d Acquired events, want the first grant, a denial and a grant", len(rec.acquired))
		}
		first, second, last := rec.acquired[0], rec.acquired[1], rec.acquired[len(rec.acquired)-1]
		if first.Outcome != sluice.Granted || second.Outcome != sluice.RetryIn || second.RetryIn <= 0 || last.Outcome != sluice.Granted {
			t.Errorf("outcomes = %v, %v (retry in %v), %v; want GRANTED, RETRY_IN (>0), GRANTED", first.Outcome, second.Outcome, second.RetryIn, last.Outcome)
		}
		if got, want := first.Dimensions, []sluice.Request{{Dimension: "openai#rpm", Cost: 100}}; len(got) != 1 || got[0] != want[0] {
			t.Errorf("Dimensions = %v, want %v", got, want)
		}
		if len(rec.waited) != 1 || !rec.waited[0].Granted || rec.waited[0].Attempts != len(rec.acquired)-1 {
			t.Errorf("Waited = %+v, want one granted wait of %d attempts", rec.waited, len(rec.acquired)-1)
		}
		if len(rec.released) != 1 || rec.released[0].Lease != l.ID() || rec.released[0].Released {
			t.Errorf("Released = %+v, want one unrecorded release of %s", rec.released, l.ID())
		}
	})
}

func TestObserverSettlePenaltyReconcile(t *testing.T) {
	ctx := context.Background()
	var rec recorder
	c, clk, _ := newClient(t, sluice.WithObserver(rec.observer()))
	res, err := c.AcquireMany(ctx, []sluice.Request{{Dimension: "openai#tpm", Cost: 2000}, {Dimension: "elevenlabs#concurrent", Cost: 1}}, sluice.WithTTL(time.Second))
	if err != nil || !res.Granted() {
		t.Fatal(res.Outcome, err)
	}
	if _, err := res.Lease.Settle(ctx, "openai#tpm", 1500); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	if _, err := res.Lease.Settle(ctx, "openai#tpm", 1700); err != nil { // late charge
		t.Fatal(err)
	}
	if _, err := c.Penalize(ctx, "openai#rpm", 0.5); err != nil {
		t.Fatal(err)
	}
	rr, err := c.Reconcile(ctx, sluice.ReconcileOptions{})
	if err != nil || rr.Processed != 1 || rr.Reclaimed != 1 {
		t.Fatalf("Reconcile = %+v, %v; want one lease processed and reclaimed", rr, err)
	}
	want := []sluice.SettleEvent{
		{Dimension: "openai#tpm", Estimate: 2000, Actual: 1500, Applied: -500_000},
		{Dimension: "openai#tpm", Estimate: 1500, Actual: 1700, Applied: 200_000, Late: true},
	}
	if len(rec.settled) != len(want) {
		t.Fatalf("Settled = %+v, want %+v", rec.settled, want)
	}
	for i := range want {
		if got := rec.settled[i]; got != want[i] {
			t.Errorf("Settled[%d] = %+v, want %+v", i, got, want[i])
		}
	}
	if len(rec.penalty) != 1 || rec.penalty[0].Before != 100_000 || rec.penalty[0].After != 50_000 {
		t.Errorf("Penalized = %+v, want 100000 → 50000", rec.penalty)
	}
	if len(rec.recon) != 1 || rec.recon[0].Restored != 1 || rec.recon[0].Reclaimed != 1 {
		t.Errorf("Reconciled = %+v, want one batch restoring 1", rec.recon)
	}
}

func TestObserverStoreErrorAndLeaseLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var rec recorder
		fs := &faultStore{Forward: contract.Forward{Store: memstore.New()}, err: store.ErrContention, n: 1}
		c, err := sluice.New(fs, config(slotTimeout(time.Second)), sluice.WithObserver(rec.observer()))
		if err != nil {
			t.Fatal(err)
		}
		putSeedBuckets(t, c)
		h, err := c.Slot(ctx, "elevenlabs#concurrent", sluice.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// The reconciler reclaims the lease behind the holder's back: the
		// next renewal finds no record and the handle gives the lease up.
		if _, err := fs.Store.Release(ctx, store.ReleaseRequest{Now: time.Now(), ID: mustParse(t, h.Lease().ID())}); err != nil {
			t.Fatal(err)
		}
		<-h.Context().Done()
		_ = h.Release(ctx)
		if len(rec.errs) == 0 || rec.errs[0].Op != "acquire" || rec.errs[0].Kind != sluice.KindContention {
			t.Errorf("StoreError = %+v, want a contention on acquire first", rec.errs)
		}
		if len(rec.lost) != 1 || rec.lost[0].Lease != h.Lease().ID() || !errors.Is(rec.lost[0].Cause, sluice.ErrLeaseExpired) {
			t.Errorf("LeaseLost = %+v, want one for %s caused by ErrLeaseExpired", rec.lost, h.Lease().ID())
		}
	})
}

func mustParse(t *testing.T, id string) store.LeaseID {
	t.Helper()
	lid, err := store.ParseLeaseID(id)
	if err != nil {
		t.Fatal(err)
	}
	return lid
}

// TestAcquireAllocs pins the cost of Client.Acquire on an in-process store
// with no observer: one allocation (the acquisition), no timeout context.
func TestAcquireAllocs(t *testing.T) {
	c, _, _ := newClient(t, config(leaseTTL(time.Millisecond)))
	ctx := context.Background()
	if err := c.PutBucket(ctx, sluice.Bucket{Name: "big#rpm", Config: sluice.PerMinute(sluice.Requests, 1_000_000_000)}); err != nil {
		t.Fatal(err)
	}
	got := testing.AllocsPerRun(100, func() {
		if res, err := c.Acquire(ctx, "big#rpm"); err != nil || !res.Granted() {
			t.Fatal(res.Outcome, err)
		}
	})
	if got > 1 {
		t.Errorf("Acquire allocates %v times per call, want 1", got)
	}
}

func TestObserverCooldownAndSync(t *testing.T) {
	ctx := context.Background()
	var a, b recorder
	c, _, _ := newClient(t, sluice.WithObserver(sluice.Observers(a.observer(), nil, b.observer())))
	if _, err := c.Sync(ctx, "openai#rpm", 70); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CooldownFor(ctx, "openai#rpm", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	_, coolErr := c.CooldownFor(ctx, "elevenlabs#concurrent", time.Second)
	_, syncErr := c.Sync(ctx, "openai#nope", 1)
	for _, rec := range []*recorder{&a, &b} {
		wantCooled := []sluice.CooldownEvent{
			{Dimension: "openai#rpm", Until: t0.Add(2 * time.Second), Before: 70_000, After: 0},
			{Dimension: "elevenlabs#concurrent", Err: coolErr},
		}
		wantSynced := []sluice.SyncEvent{
			{Dimension: "openai#rpm", Remaining: 70, Before: 100_000, After: 70_000},
			{Dimension: "openai#nope", Remaining: 1, Err: syncErr},
		}
		if len(rec.cooled) != len(wantCooled) || len(rec.synced) != len(wantSynced) {
			t.Fatalf("Cooled = %+v, Synced = %+v; want %+v, %+v", rec.cooled, rec.synced, wantCooled, wantSynced)
		}
		for i, w := range wantCooled {
			if g := rec.cooled[i]; g.Dimension != w.Dimension || !g.Until.Equal(w.Until) || g.Before != w.Before || g.After != w.After || g.Err != w.Err {
				t.Errorf("Cooled[%d] = %+v, want %+v", i, g, w)
			}
		}
		for i, w := range wantSynced {
			if g := rec.synced[i]; g != w {
				t.Errorf("Synced[%d] = %+v, want %+v", i, g, w)
			}
		}
	}
	if coolErr == nil || syncErr == nil {
		t.Errorf("errors = %v, %v; want both calls to fail", coolErr, syncErr)
	}
}
