package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/reconcile"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type clock struct{ t atomic.Int64 }

func (c *clock) Now() time.Time          { return time.UnixMilli(c.t.Load()) }
func (c *clock) Advance(d time.Duration) { c.t.Add(d.Milliseconds()) }
func newClock(t time.Time) *clock        { c := &clock{}; c.t.Store(t.UnixMilli()); return c }
func acquire(t *testing.T, c *sluice.Client, dims ...string) {
	t.Helper()
	reqs := make([]sluice.Request, len(dims))
	for i, d := range dims {
		reqs[i] = sluice.Request{Dimension: d, Cost: 1}
	}
	res, err := c.AcquireMany(context.Background(), reqs, sluice.WithRecord())
	if err != nil || !res.Granted() {
		t.Fatalf("acquire %v = %v, %v", dims, res.Outcome, err)
	}
}

func setup(t *testing.T) (*sluice.Client, *memstore.Store, *clock) {
	t.Helper()
	clk := newClock(t0)
	st := memstore.New()
	cfg := sluice.DefaultConfig()
	cfg.LeaseTTL = time.Minute
	c, err := sluice.New(st, sluice.WithConfig(cfg), sluice.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, b := range []sluice.Bucket{
		{Name: "elevenlabs#concurrent", Config: sluice.ConcurrentLimit(5)},
		{Name: "openai#rpm", Config: sluice.PerMinute(sluice.Requests, 100)},
		{Name: "openai#tpm", Config: sluice.PerMinute(sluice.Tokens, 1000)},
	} {
		if err := c.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	return c, st, clk
}

func TestRunOnceReportsLikeTheSDKsReconciler(t *testing.T) {
	ctx := context.Background()
	c, st, clk := setup(t)
	for i := 0; i < 3; i++ {
		acquire(t, c, "elevenlabs#concurrent")
	}
	acquire(t, c, "openai#rpm", "openai#tpm")
	clk.Advance(2 * time.Minute)
	var buf bytes.Buffer
	r, err := reconcile.New(st, reconcile.WithClock(clk), reconcile.WithBatchSize(2),
		reconcile.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := reconcile.Report{Restored: 4, Reclaimed: 3, Batches: 2,
		Dimensions: []string{"elevenlabs#concurrent", "openai#rpm", "openai#tpm"}}
	if !equal(rep, want) {
		t.Fatalf("report = %+v, want %+v", rep, want)
	}
	var ev struct {
		Msg           string   `json:"msg"`
		Restored      int      `json:"restored"`
		Dimensions    []string `json:"dimensions"`
		AlreadyCapped int      `json:"already_capped"`
	}
	if err := json.Unmarshal(buf.Bytes(), &ev); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	if ev.Msg != "reconciler.complete" || ev.Restored != 4 || len(ev.Dimensions) != 3 || ev.AlreadyCapped != 0 {
		t.Errorf("logged %+v, want reconciler.complete with restored 4 over 3 dimensions", ev)
	}
	s, _ := c.GetBucket(ctx, "elevenlabs#concurrent")
	if got, want := s.Tokens, sluice.Millitokens(5000); got != want {
		t.Errorf("concurrent balance = %d, want %d", got, want)
	}
	// Idempotent: a second pass finds nothing.
	if rep, err := r.RunOnce(ctx); err != nil || rep.Restored != 0 {
		t.Errorf("second pass = %+v, %v; want nothing restored", rep, err)
	}
}

func TestMaxBatchesTruncates(t *testing.T) {
	c, st, clk := setup(t)
	for i := 0; i < 5; i++ {
		acquire(t, c, "elevenlabs#concurrent")
	}
	clk.Advance(2 * time.Minute)
	r, _ := reconcile.New(st, reconcile.WithClock(clk), reconcile.WithBatchSize(2), reconcile.WithMaxBatches(2))
	rep, err := r.RunOnce(context.Background())
	if err != nil || rep.Restored != 4 || !rep.Truncated {
		t.Fatalf("first pass = %+v, %v; want 4 restored, truncated", rep, err)
	}
	rep, err = r.RunOnce(context.Background())
	if err != nil || rep.Restored != 1 || rep.Truncated {
		t.Fatalf("second pass = %+v, %v; want the last 1 restored", rep, err)
	}
}

func TestRunLoopsUntilCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st, _ := setup(t)
		_ = c
		var passes atomic.Int32
		r, _ := reconcile.New(st, reconcile.WithReportFunc(func(reconcile.Report) { passes.Add(1) }))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.Run(ctx, time.Minute) }()
		time.Sleep(5*time.Minute + time.Second)
		synctest.Wait()
		if got, want := passes.Load(), int32(6); got != want { // at 0,1,2,3,4,5 min
			t.Errorf("passes after 5 min = %d, want %d", got, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel = %v, want nil", err)
		}
	})
}

type brokenStore struct{ store.Store }

func (brokenStore) Reconcile(context.Context, store.ReconcileRequest) (store.ReconcileResult, error) {
	return store.ReconcileResult{}, store.Unavailable("reconcile", errors.New("connection refused"))
}

func TestRunOnceReportsStoreErrors(t *testing.T) {
	r, _ := reconcile.New(brokenStore{memstore.New()})
	if _, err := r.RunOnce(context.Background()); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("RunOnce on a broken store = %v, want ErrUnavailable", err)
	}
	if _, err := reconcile.New(nil); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("New(nil) = %v, want ErrInvalid", err)
	}
}

func equal(a, b reconcile.Report) bool {
	return slices.Equal(a.Dimensions, b.Dimensions) && a.Restored == b.Restored &&
		a.AlreadyCapped == b.AlreadyCapped && a.Reclaimed == b.Reclaimed && a.Orphans == b.Orphans &&
		a.Batches == b.Batches && a.Truncated == b.Truncated
}

// A Reconciler over a Client runs its batches through it: with its clock,
// and reported to its Observer.
func TestNewForClient(t *testing.T) {
	ctx := context.Background()
	_, st, clk := setup(t)
	var batches atomic.Int64
	obs := &sluice.Observer{Reconciled: func(context.Context, sluice.ReconcileEvent) { batches.Add(1) }}
	c, err := sluice.New(st, sluice.WithClock(clk), sluice.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	acquire(t, c, "elevenlabs#concurrent")
	r, err := reconcile.NewForClient(c, reconcile.WithBatchSize(1))
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := r.RunOnce(ctx); err != nil || rep.Restored != 0 {
		t.Fatalf("before expiry: %+v, %v; want nothing restored", rep, err)
	}
	clk.Advance(2 * time.Minute)
	rep, err := r.RunOnce(ctx)
	if err != nil || rep.Restored != 1 || rep.Reclaimed != 1 {
		t.Fatalf("after expiry by the Client's clock: %+v, %v; want 1 restored", rep, err)
	}
	if got := batches.Load(); got < 2 {
		t.Errorf("observer saw %d batches, want at least 2", got)
	}
}

func TestNewForClientRejects(t *testing.T) {
	c, _, clk := setup(t)
	tests := []struct {
		name  string
		c     *sluice.Client
		opts  []reconcile.Option
		field string
	}{
		{"nil client", nil, nil, "client"},
		{"clock on the reconciler", c, []reconcile.Option{reconcile.WithClock(clk)}, "clock"},
		{"batch size", c, []reconcile.Option{reconcile.WithBatchSize(0)}, "batch_size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := reconcile.NewForClient(tt.c, tt.opts...)
			var fe *sluice.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, sluice.ErrInvalid) {
				t.Errorf("got %v, want a FieldError on %s matching ErrInvalid", err, tt.field)
			}
		})
	}
}
