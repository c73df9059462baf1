package sluice_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
)

func TestCooldownThenGrantsAtTheRefillRate(t *testing.T) {
	ctx := context.Background()
	c, clk, _ := newClient(t)
	if _, err := c.Acquire(ctx, "openai#rpm", sluice.WithCost(40)); err != nil {
		t.Fatal(err)
	}
	got, err := c.CooldownFor(ctx, "openai#rpm", 5*time.Second)
	if want := (sluice.CooldownResult{Before: 60_000, After: 0, Until: t0.Add(5 * time.Second)}); err != nil || got != want {
		t.Fatalf("CooldownFor(5s) = %+v, %v; want %+v", got, err, want)
	}
	res, err := c.Acquire(ctx, "openai#rpm")
	if err != nil || res.Granted() || res.RetryIn != 5600*time.Millisecond {
		t.Fatalf("Acquire during the cooldown = %v %s, %v; want RETRY_IN 5.6s (to the end, then one token)", res.Outcome, res.RetryIn, err)
	}
	clk.Advance(res.RetryIn - time.Millisecond)
	if res, _ := c.Acquire(ctx, "openai#rpm"); res.Granted() {
		t.Fatal("granted 1 ms before RetryIn")
	}
	clk.Advance(time.Millisecond)
	if res, _ := c.Acquire(ctx, "openai#rpm"); !res.Granted() {
		t.Fatalf("denied after waiting RetryIn: %+v", res)
	}
	if res, _ := c.Acquire(ctx, "openai#rpm"); res.Granted() || res.RetryIn != 600*time.Millisecond {
		t.Errorf("second Acquire after the cooldown = %v %s; want RETRY_IN 600ms (no burst)", res.Outcome, res.RetryIn)
	}
}

func TestCooldownStateAndTimeUntil(t *testing.T) {
	ctx := context.Background()
	c, clk, _ := newClient(t)
	st, err := c.GetBucket(ctx, "openai#rpm")
	if err != nil || !st.CooldownUntil.IsZero() || st.CoolingDown() {
		t.Fatalf("before any cooldown: CooldownUntil %s, cooling %t, %v; want zero, false", st.CooldownUntil, st.CoolingDown(), err)
	}
	until := t0.Add(3 * time.Second)
	if _, err := c.Cooldown(ctx, "openai#rpm", until); err != nil {
		t.Fatal(err)
	}
	st, err = c.GetBucket(ctx, "openai#rpm")
	if err != nil || !st.CooldownUntil.Equal(until) || !st.CoolingDown() {
		t.Fatalf("during: CooldownUntil %s, cooling %t, %v; want %s, true", st.CooldownUntil, st.CoolingDown(), err, until)
	}
	if got, want := sluice.TimeUntil(st, 1), 3600*time.Millisecond; got != want {
		t.Errorf("TimeUntil(1) during the cooldown = %s, want %s", got, want)
	}
	clk.Advance(3 * time.Second)
	st, _ = c.GetBucket(ctx, "openai#rpm")
	if !st.CooldownUntil.Equal(until) || st.CoolingDown() {
		t.Errorf("at the end: CooldownUntil %s, cooling %t; want %s kept, false", st.CooldownUntil, st.CoolingDown(), until)
	}
	if err := c.PutBucket(ctx, sluice.Bucket{Name: "openai#rpm", Config: sluice.PerMinute(sluice.Requests, 100)}, sluice.ResetTokens()); err != nil {
		t.Fatal(err)
	}
	if st, _ = c.GetBucket(ctx, "openai#rpm"); !st.CooldownUntil.IsZero() {
		t.Errorf("after a reset: CooldownUntil %s, want zero", st.CooldownUntil)
	}
}

func TestTimeUntilInACooldown(t *testing.T) {
	s := sluice.BucketState{
		Bucket: sluice.Bucket{Name: "a#rpm", Config: sluice.PerMinute(sluice.Requests, 100)},
		Tokens: 0, LastRefill: t0, CooldownUntil: t0.Add(time.Second), Now: t0,
	}
	tests := []struct {
		n    int64
		want time.Duration
	}{{0, time.Second}, {1, 1600 * time.Millisecond}, {2, 2200 * time.Millisecond}}
	for _, tt := range tests {
		if got := sluice.TimeUntil(s, tt.n); got != tt.want {
			t.Errorf("TimeUntil(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
}

func TestSync(t *testing.T) {
	ctx := context.Background()
	c, clk, _ := newClient(t)
	tests := []struct {
		remaining     int64
		before, after sluice.Millitokens
	}{
		{40, 100_000, 40_000},
		{60, 40_000, 40_000}, // never raised
		{0, 40_000, 0},
	}
	for _, tt := range tests {
		got, err := c.Sync(ctx, "openai#rpm", tt.remaining)
		if want := (sluice.SyncResult{Before: tt.before, After: tt.after}); err != nil || got != want {
			t.Errorf("Sync(%d) = %+v, %v; want %+v", tt.remaining, got, err, want)
		}
	}
	clk.Advance(600 * time.Millisecond)
	if res, err := c.Acquire(ctx, "openai#rpm"); err != nil || !res.Granted() {
		t.Errorf("Acquire 600ms after syncing to 0 = %v, %v; want granted", res.Outcome, err)
	}
}

func TestCooldownAndSyncErrors(t *testing.T) {
	ctx := context.Background()
	c, _, _ := newClient(t)
	var fe *bucket.FieldError
	tests := []struct {
		name  string
		err   error
		field string
	}{
		{"until now", func() error { _, err := c.Cooldown(ctx, "openai#rpm", t0); return err }(), "until"},
		{"until past", func() error { _, err := c.Cooldown(ctx, "openai#rpm", t0.Add(-time.Second)); return err }(), "until"},
		{"until over 24h", func() error {
			_, err := c.Cooldown(ctx, "openai#rpm", t0.Add(sluice.MaxCooldown+time.Millisecond))
			return err
		}(), "until"},
		{"zero duration", func() error { _, err := c.CooldownFor(ctx, "openai#rpm", 0); return err }(), "duration"},
		{"sub-millisecond duration", func() error { _, err := c.CooldownFor(ctx, "openai#rpm", time.Microsecond); return err }(), "duration"},
		{"duration over 24h", func() error { _, err := c.CooldownFor(ctx, "openai#rpm", 25*time.Hour); return err }(), "duration"},
		{"cooldown concurrent", func() error { _, err := c.CooldownFor(ctx, "elevenlabs#concurrent", time.Second); return err }(), "dimension"},
		{"negative remaining", func() error { _, err := c.Sync(ctx, "openai#rpm", -1); return err }(), "remaining"},
		{"sync concurrent", func() error { _, err := c.Sync(ctx, "elevenlabs#concurrent", 1); return err }(), "dimension"},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, sluice.ErrInvalid) || !errors.As(tt.err, &fe) || fe.Field != tt.field {
			t.Errorf("%s: error %v, want a *FieldError on %q matching ErrInvalid", tt.name, tt.err, tt.field)
		}
	}
	var ce *sluice.ConfigurationError
	if _, err := c.CooldownFor(ctx, "openai#nope", time.Second); !errors.As(err, &ce) {
		t.Errorf("cooldown of an unknown dimension: %v, want a *ConfigurationError", err)
	}
	if _, err := c.Sync(ctx, "openai#nope", 1); !errors.As(err, &ce) {
		t.Errorf("sync of an unknown dimension: %v, want a *ConfigurationError", err)
	}
	if got := tokens(t, c, "openai#rpm"); got != 100_000 {
		t.Errorf("after the failed calls: %d millitokens, want 100000 (unchanged)", got)
	}
}
