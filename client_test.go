package sluice_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

func TestAcquireExactRetryIn(t *testing.T) {
	ctx := context.Background()
	c, clk, _ := newClient(t)
	for i := 0; i < 100; i++ {
		res, err := c.Acquire(ctx, "openai#rpm")
		if err != nil || !res.Granted() {
			t.Fatalf("acquire %d = %v, %v; want granted", i, res.Outcome, err)
		}
	}
	res, err := c.Acquire(ctx, "openai#rpm")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Outcome, sluice.RetryIn; got != want {
		t.Fatalf("101st acquire outcome = %v, want %v", got, want)
	}
	if got, want := res.RetryIn, 600*time.Millisecond; got != want {
		t.Fatalf("RetryIn = %v, want %v (one token at 100/min)", got, want)
	}
	clk.Advance(res.RetryIn - time.Millisecond)
	if res, _ := c.Acquire(ctx, "openai#rpm"); res.Granted() {
		t.Fatalf("granted 1 ms before RetryIn")
	}
	clk.Advance(time.Millisecond)
	if res, _ := c.Acquire(ctx, "openai#rpm"); !res.Granted() {
		t.Fatalf("denied after waiting RetryIn: %+v", res)
	}
}

func TestAcquireManyAllOrNothing(t *testing.T) {
	ctx := context.Background()
	c, _, _ := newClient(t)
	res, err := c.AcquireMany(ctx, []sluice.Request{{Dimension: "openai#rpm", Cost: 1}, {Dimension: "openai#tpm", Cost: 9_000}})
	if err != nil || !res.Granted() {
		t.Fatalf("first AcquireMany = %v, %v", res.Outcome, err)
	}
	res, err = c.AcquireMany(ctx, []sluice.Request{{Dimension: "openai#rpm", Cost: 1}, {Dimension: "openai#tpm", Cost: 2_000}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Granted() {
		t.Fatal("granted 2000 tpm with 1000 left")
	}
	// 1000 tokens short at 10000/min = 6 s.
	if got, want := res.RetryIn, 6*time.Second; got != want {
		t.Errorf("RetryIn = %v, want %v", got, want)
	}
	if got, want := tokens(t, c, "openai#rpm"), int64(99_000); got != want {
		t.Errorf("openai#rpm after a denial = %d millitokens, want %d (nothing consumed)", got, want)
	}
	if got := res.Dimensions[0].RetryIn; got != 0 {
		t.Errorf("rpm's own RetryIn = %v, want 0", got)
	}
}

func TestAcquireErrors(t *testing.T) {
	ctx := context.Background()
	c, _, _ := newClient(t)
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"unknown dimension", func() error { _, err := c.Acquire(ctx, "openai#rpd"); return err }, sluice.ErrUnknownDimension},
		{"cost above capacity", func() error { _, err := c.Acquire(ctx, "openai#rpm", sluice.WithCost(101)); return err }, sluice.ErrCostExceedsCapacity},
		{"zero cost", func() error { _, err := c.Acquire(ctx, "openai#rpm", sluice.WithCost(0)); return err }, sluice.ErrInvalid},
		{"negative cost", func() error { _, err := c.Acquire(ctx, "openai#rpm", sluice.WithCost(-1)); return err }, sluice.ErrInvalid},
		{"zero cost in AcquireMany", func() error {
			_, err := c.AcquireMany(ctx, []sluice.Request{{Dimension: "openai#rpm", Cost: 0}})
			return err
		}, sluice.ErrInvalid},
		{"no requests", func() error { _, err := c.AcquireMany(ctx, nil); return err }, sluice.ErrInvalid},
		{"lease# name", func() error { _, err := c.Acquire(ctx, "lease#x"); return err }, sluice.ErrInvalid},
		{"control character", func() error { _, err := c.Acquire(ctx, "openai\n#rpm"); return err }, sluice.ErrInvalid},
		{"bad ttl", func() error { _, err := c.Acquire(ctx, "openai#rpm", sluice.WithTTL(-time.Second)); return err }, sluice.ErrInvalid},
		{"bad penalize factor", func() error { _, err := c.Penalize(ctx, "openai#rpm", 1.5); return err }, sluice.ErrInvalid},
		{"penalize factor finer than 0.001", func() error { _, err := c.Penalize(ctx, "openai#rpm", 0.0005); return err }, sluice.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.want) {
				t.Fatalf("error = %v, want one matching %v", err, tt.want)
			}
		})
	}
	var ce *sluice.ConfigurationError
	if _, err := c.Acquire(ctx, "openai#rpd"); !errors.As(err, &ce) || ce.Dimension != "openai#rpd" {
		t.Errorf("unknown dimension error = %v, want a ConfigurationError naming openai#rpd", err)
	}
	if got, want := tokens(t, c, "openai#rpm"), int64(100_000); got != want {
		t.Errorf("balance after bad input = %d, want %d (nothing consumed)", got, want)
	}
}

func TestConcurrentReleaseAndReclaim(t *testing.T) {
	ctx := context.Background()
	c, clk, st := newClient(t, config(leaseTTL(10*time.Second)))
	var leases []*sluice.Lease
	for i := 0; i < 2; i++ {
		res, err := c.Acquire(ctx, "elevenlabs#concurrent")
		if err != nil || !res.Granted() {
			t.Fatalf("acquire %d = %v, %v", i, res.Outcome, err)
		}
		if !res.Lease.Recorded() {
			t.Fatal("concurrent lease not recorded")
		}
		leases = append(leases, res.Lease)
	}
	res, _ := c.Acquire(ctx, "elevenlabs#concurrent")
	if res.Granted() || res.RetryIn <= 0 || res.RetryIn > time.Second {
		t.Fatalf("third acquire = %v retry %v; want RETRY_IN in (0, 1s]", res.Outcome, res.RetryIn)
	}
	if err := leases[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := leases[0].Release(ctx); err != nil {
		t.Fatalf("second Release = %v, want nil (idempotent)", err)
	}
	if got, want := tokens(t, c, "elevenlabs#concurrent"), int64(1000); got != want {
		t.Fatalf("after one release: %d millitokens, want %d", got, want)
	}
	// The second holder "crashes"; its lease expires and is reclaimed.
	clk.Advance(11 * time.Second)
	rr, err := st.Reconcile(ctx, store.ReconcileRequest{Now: clk.Now(), Limit: store.DefaultReconcileLimit})
	if err != nil || rr.Reclaimed != 1 {
		t.Fatalf("Reconcile = %+v, %v; want 1 reclaimed", rr, err)
	}
	if err := leases[1].Extend(ctx, time.Minute); !errors.Is(err, sluice.ErrLeaseExpired) {
		t.Errorf("Extend of a reclaimed lease = %v, want ErrLeaseExpired", err)
	}
	if err := leases[1].Release(ctx); !errors.Is(err, sluice.ErrLeaseExpired) {
		t.Errorf("Release of a reclaimed lease = %v, want ErrLeaseExpired", err)
	}
	if got, want := tokens(t, c, "elevenlabs#concurrent"), int64(2000); got != want {
		t.Fatalf("after reclaim and late release: %d millitokens, want %d (restored once)", got, want)
	}
}

func TestEstimateThenSettle(t *testing.T) {
	ctx := context.Background()
	c, clk, _ := newClient(t)
	res, err := c.Acquire(ctx, "openai#tpm", sluice.WithCost(2000))
	if err != nil || !res.Granted() {
		t.Fatalf("reserve = %v, %v", res.Outcome, err)
	}
	l := res.Lease
	if _, err := l.Settle(ctx, "openai#tpm", 1300); err != nil {
		t.Fatal(err)
	}
	if got, want := tokens(t, c, "openai#tpm"), int64(8_700_000); got != want {
		t.Fatalf("after settling 2000→1300: %d, want %d", got, want)
	}
	st, err := l.Adjust(ctx, "openai#tpm", 15_000) // far over: into debt
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Applied, sluice.Millitokens(15_000_000); got != want {
		t.Errorf("Applied = %d, want %d", got, want)
	}
	if got, want := tokens(t, c, "openai#tpm"), int64(-6_300_000); got != want {
		t.Fatalf("after charging 15000 more: %d, want %d (debt)", got, want)
	}
	if got, want := l.Cost("openai#tpm"), int64(16_300); got != want {
		t.Errorf("lease cost = %d, want %d", got, want)
	}
	if _, err := l.Adjust(ctx, "openai#tpm", -20_000); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("refund above the held cost = %v, want ErrInvalid", err)
	}
	clk.Advance(time.Minute) // refill 10000 repays the debt
	if got, want := tokens(t, c, "openai#tpm"), int64(3_700_000); got != want {
		t.Fatalf("a minute later: %d, want %d", got, want)
	}
	if _, err := l.Adjust(ctx, "openai#rpm", 1); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("adjusting a dimension outside the lease = %v, want ErrInvalid", err)
	}
	_ = l.Release(ctx)
	if _, err := l.Adjust(ctx, "openai#tpm", 1); !errors.Is(err, sluice.ErrLeaseReleased) {
		t.Errorf("Adjust after Release = %v, want ErrLeaseReleased", err)
	}
}

func TestFailurePolicy(t *testing.T) {
	ctx := context.Background()
	down := store.Unavailable("acquire", errors.New("connection refused"))
	for _, tt := range []struct {
		policy       sluice.FailurePolicy
		wantErr      bool
		wantDegraded bool
	}{
		{sluice.FailClosed, true, false},
		{sluice.FailOpen, false, true},
	} {
		t.Run(tt.policy.String(), func(t *testing.T) {
			fs := &faultStore{Forward: contract.Forward{Store: memstore.New()}, err: down, n: 1}
			c, err := sluice.New(fs, config(func(c *sluice.Config) { c.FailurePolicy = tt.policy }))
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Acquire(ctx, "openai#rpm")
			if got := err != nil; got != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, sluice.ErrUnavailable) {
				t.Fatalf("error = %v, want ErrUnavailable", err)
			}
			if res.Degraded != tt.wantDegraded || (tt.wantDegraded && (!res.Granted() || !res.Lease.Degraded())) {
				t.Fatalf("result = %+v, want degraded %v", res, tt.wantDegraded)
			}
			if tt.wantDegraded {
				if err := res.Lease.Release(ctx); err != nil {
					t.Fatalf("releasing a degraded lease = %v", err)
				}
			}
		})
	}
}

func TestPeekPenalize(t *testing.T) {
	ctx := context.Background()
	c, _, _ := newClient(t)
	if _, err := c.Acquire(ctx, "openai#rpm", sluice.WithCost(50)); err != nil {
		t.Fatal(err)
	}
	p, err := c.Penalize(ctx, "openai#rpm", sluice.DefaultPenaltyFactor)
	if err != nil {
		t.Fatal(err)
	}
	if p.Before != 50_000 || p.After != 40_000 {
		t.Errorf("Penalty = %+v, want 50000 → 40000", p)
	}
	st, err := c.Peek(ctx, "openai#rpm", "elevenlabs#concurrent")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st[0].Tokens, sluice.Millitokens(40_000); got != want {
		t.Errorf("after 50 taken and ×0.8: %d, want %d", got, want)
	}
	if got, want := sluice.TimeUntil(st[0], 41), 600*time.Millisecond; got != want {
		t.Errorf("TimeUntil(41) = %v, want %v", got, want)
	}
	if got := sluice.TimeUntil(st[1], 2); got != 0 {
		t.Errorf("TimeUntil on a free concurrent bucket = %v, want 0", got)
	}
	if _, err := c.Penalize(ctx, "elevenlabs#concurrent", 0.5); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("penalizing a concurrent bucket = %v, want ErrInvalid", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := sluice.New(nil); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("New(nil) = %v, want ErrInvalid", err)
	}
	if _, err := sluice.New(memstore.New(), config(leaseTTL(0))); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("New with zero lease TTL = %v, want ErrInvalid", err)
	}
}

func TestBurstAboveSustainedRate(t *testing.T) {
	ctx := context.Background()
	c, clk, _ := newClient(t)
	// Sustained 10/min, burst 15.
	cfg := sluice.PerMinute(sluice.Requests, 10)
	cfg.Capacity = 15
	if err := c.PutBucket(ctx, sluice.Bucket{Name: "vendor#rpm", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	granted := 0
	for i := 0; i < 20; i++ {
		if res, _ := c.Acquire(ctx, "vendor#rpm"); res.Granted() {
			granted++
		}
	}
	if granted != 15 {
		t.Fatalf("granted %d from a full burst bucket, want 15", granted)
	}
	clk.Advance(time.Minute)
	granted = 0
	for i := 0; i < 20; i++ {
		if res, _ := c.Acquire(ctx, "vendor#rpm"); res.Granted() {
			granted++
		}
	}
	if granted != 10 {
		t.Fatalf("granted %d a minute later, want the sustained 10", granted)
	}
}

func TestAcquireHonoursCancelledContext(t *testing.T) {
	c, _, _ := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Acquire(ctx, "openai#rpm"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context = %v, want context.Canceled", err)
	}
	if got, want := tokens(t, c, "openai#rpm"), int64(100_000); got != want {
		t.Errorf("balance = %d, want %d", got, want)
	}
}
