package sluice_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// manualClock is a Clock the test moves by hand.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newClient returns a client over a fresh memstore with the example buckets:
// openai#rpm 100/min, openai#tpm 10000/min, elevenlabs#concurrent 2.
func newClient(t *testing.T, opts ...sluice.Option) (*sluice.Client, *manualClock, store.Store) {
	t.Helper()
	clk := &manualClock{t: t0}
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	c, err := sluice.New(st, append([]sluice.Option{sluice.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	putSeedBuckets(t, c)
	return c, clk, st
}

func putSeedBuckets(t *testing.T, c *sluice.Client) {
	t.Helper()
	ctx := context.Background()
	for _, b := range []sluice.Bucket{
		{Name: "openai#rpm", Config: sluice.PerMinute(sluice.Requests, 100)},
		{Name: "openai#tpm", Config: sluice.PerMinute(sluice.Tokens, 10_000)},
		{Name: "elevenlabs#concurrent", Config: sluice.ConcurrentLimit(2)},
	} {
		if err := c.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
}

func tokens(t *testing.T, c *sluice.Client, dim string) int64 {
	t.Helper()
	s, err := c.GetBucket(context.Background(), dim)
	if err != nil {
		t.Fatal(err)
	}
	return int64(s.Tokens)
}

// faultStore wraps a store and fails Acquire with err for the next n calls.
type faultStore struct {
	contract.Forward
	mu    sync.Mutex
	err   error
	n     int
	calls int
}

func (f *faultStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	f.mu.Lock()
	f.calls++
	if f.n > 0 {
		f.n--
		err := f.err
		f.mu.Unlock()
		return err
	}
	f.mu.Unlock()
	return f.Store.Acquire(ctx, req, res)
}

// config returns WithConfig of DefaultConfig changed by edits.
func config(edits ...func(*sluice.Config)) sluice.Option {
	cfg := sluice.DefaultConfig()
	for _, e := range edits {
		e(&cfg)
	}
	return sluice.WithConfig(cfg)
}

// leaseTTL sets Config.LeaseTTL to d (see config).
func leaseTTL(d time.Duration) func(*sluice.Config) {
	return func(c *sluice.Config) { c.LeaseTTL = d }
}

// slotTimeout sets Config.DefaultSlotTimeout to d (see config).
func slotTimeout(d time.Duration) func(*sluice.Config) {
	return func(c *sluice.Config) { c.DefaultSlotTimeout = d }
}

// opTimeout sets Config.OpTimeout to d (see config).
func opTimeout(d time.Duration) func(*sluice.Config) {
	return func(c *sluice.Config) { c.OpTimeout = d }
}

// failOpen sets Config.FailurePolicy to FailOpen (see config).
func failOpen(c *sluice.Config) { c.FailurePolicy = sluice.FailOpen }

// within returns ctx with a deadline d from now, cancelled when the test
// ends: a wait under it ends after d.
func within(ctx context.Context, t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(ctx, d)
	t.Cleanup(cancel)
	return ctx
}
