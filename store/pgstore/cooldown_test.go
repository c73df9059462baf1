package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// TestCooldownScenario walks a requests bucket of 60 per minute (one token
// a second) through a cooldown in caller-clock mode: the balance drops to
// zero, nothing is granted before the end, earning restarts from the end,
// a shorter cooldown does not shorten it, a refund during it lifts the
// balance at most to zero, sync lowers and never raises, reconfiguring
// keeps the end and a reset clears it.
func TestCooldownScenario(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	put(t, s, store.Bucket{Name: "r", Config: bucket.PerPeriod(bucket.Requests, 60, time.Minute)})
	at := func(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	acquire := func(ms int64) store.AcquireResult {
		t.Helper()
		var res store.AcquireResult
		req := &store.AcquireRequest{Now: at(ms), Items: []store.Item{{Dimension: "r", Cost: 1}}, ID: store.NewLeaseID(), TTL: time.Minute}
		if err := s.Acquire(ctx, req, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	peek := func(ms int64) store.BucketState {
		t.Helper()
		st, err := s.Peek(ctx, store.PeekRequest{Now: at(ms), Dimensions: []string{"r"}})
		if err != nil {
			t.Fatal(err)
		}
		return st[0]
	}
	base := t0.UnixMilli()

	cd, err := s.Cooldown(ctx, store.CooldownRequest{Now: at(0), Dimension: "r", Until: at(10_000)})
	if got, want := cd, (store.CooldownResult{Before: 60_000, After: 0, Until: base + 10_000}); err != nil || got != want {
		t.Fatalf("Cooldown = %+v, %v; want %+v", got, err, want)
	}
	if st := peek(5_000); st.Tokens != 0 || st.CooldownUntil != base+10_000 {
		t.Errorf("Peek during the cooldown: tokens %d, until %d; want 0, %d", st.Tokens, st.CooldownUntil, base+10_000)
	}
	// A shorter cooldown keeps the running one's end.
	cd, err = s.Cooldown(ctx, store.CooldownRequest{Now: at(2_000), Dimension: "r", Until: at(5_000)})
	if got, want := cd, (store.CooldownResult{Before: 0, After: 0, Until: base + 10_000}); err != nil || got != want {
		t.Fatalf("shorter Cooldown = %+v, %v; want %+v", got, err, want)
	}
	// A refund during the cooldown lifts the balance at most to zero.
	set, err := s.Adjust(ctx, store.AdjustRequest{Now: at(3_000), Dimension: "r", Delta: -5, ID: store.NewLeaseID(), Held: 5})
	if err != nil || set.Applied != 0 || set.Remaining != 0 {
		t.Errorf("refund during the cooldown = %+v, %v; want nothing applied, 0 remaining", set, err)
	}
	for _, c := range []struct {
		ms      int64
		granted bool
		retry   time.Duration
	}{
		{9_999, false, 1_001 * time.Millisecond}, // to the end, then a second's earning
		{10_000, false, time.Second},             // earning restarts from the end
		{10_999, false, time.Millisecond},
		{11_000, true, 0},
	} {
		if res := acquire(c.ms); res.Granted != c.granted || res.RetryIn != c.retry {
			t.Errorf("acquire at +%dms: granted %v, RetryIn %v; want %v, %v", c.ms, res.Granted, res.RetryIn, c.granted, c.retry)
		}
	}
	// Sync lowers (9 tokens earned by +20s) and never raises.
	for _, c := range []struct {
		remaining, before, after int64
	}{{50, 9_000, 9_000}, {3, 9_000, 3_000}} {
		res, err := s.Sync(ctx, store.SyncRequest{Now: at(20_000), Dimension: "r", Remaining: c.remaining})
		if got, want := res, (store.SyncResult{Before: c.before, After: c.after}); err != nil || got != want {
			t.Errorf("Sync(%d) = %+v, %v; want %+v", c.remaining, got, err, want)
		}
	}
	// Reconfiguring keeps the last cooldown's end; a reset clears it.
	for _, c := range []struct {
		reset bool
		until int64
	}{{false, base + 10_000}, {true, 0}} {
		req := store.PutBucketRequest{Now: at(20_000), Bucket: store.Bucket{Name: "r", Config: bucket.PerPeriod(bucket.Requests, 30, time.Minute)}, Reset: c.reset}
		if err := s.PutBucket(ctx, req); err != nil {
			t.Fatal(err)
		}
		if got := peek(20_000).CooldownUntil; got != c.until {
			t.Errorf("CooldownUntil after PutBucket with reset %v = %d, want %d", c.reset, got, c.until)
		}
	}
	list, err := s.ListBuckets(ctx, store.ListBucketsRequest{Now: at(20_000)})
	if err != nil || len(list) != 1 || list[0].Tokens != 30_000 || list[0].CooldownUntil != 0 {
		t.Errorf("ListBuckets after the reset = %+v, %v; want r full, no cooldown", list, err)
	}
}

// TestCooldownServerClock: with the server's clock the cooldown lasts
// Until − Now from the server's now, and the result, Peek and the wait of
// a denied acquisition all use that end.
func TestCooldownServerClock(t *testing.T) {
	ctx := context.Background()
	s := reopen(t, newStore(t), func(s *Store) { s.callerClock = false })
	put(t, s, store.Bucket{Name: "r", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	const d = time.Hour
	before := time.Now()
	// A Now far from the server's: only Until − Now matters.
	now := before.Add(-48 * time.Hour)
	res, err := s.Cooldown(ctx, store.CooldownRequest{Now: now, Dimension: "r", Until: now.Add(d)})
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := before.Add(d).UnixMilli(), after.Add(d).UnixMilli(); res.Until < lo || res.Until > hi || res.After != 0 {
		t.Fatalf("Cooldown = %+v; want After 0 and Until within [%d, %d] (server now + 1h)", res, lo, hi)
	}
	st, err := s.Peek(ctx, store.PeekRequest{Dimensions: []string{"r"}})
	if err != nil || st[0].CooldownUntil != res.Until || st[0].Tokens != 0 {
		t.Errorf("Peek = %+v, %v; want 0 tokens, CooldownUntil %d", st, err, res.Until)
	}
	var ar store.AcquireResult
	start := time.Now()
	req := &store.AcquireRequest{Now: start, Items: []store.Item{{Dimension: "r", Cost: 1}}, ID: store.NewLeaseID(), TTL: time.Minute}
	if err := s.Acquire(ctx, req, &ar); err != nil {
		t.Fatal(err)
	}
	// The wait runs to the end, then 6 s to earn a token.
	hi := time.Duration(res.Until-start.UnixMilli())*time.Millisecond + 6*time.Second
	lo := hi - time.Since(start) - time.Millisecond
	if ar.Granted || ar.RetryIn > hi || ar.RetryIn < lo {
		t.Errorf("acquire during the cooldown: granted %v, RetryIn %v; want denied, RetryIn in [%v, %v]", ar.Granted, ar.RetryIn, lo, hi)
	}
}

// TestCooldownErrors: cooldown and sync on a missing bucket are a
// *store.ConfigurationError, on a concurrent one the error of
// Bucket.CheckCoolable (nothing changes), on a closed store ErrClosed.
func TestCooldownErrors(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	slots := store.Bucket{Name: "c", Config: bucket.ConcurrentSlots(3)}
	put(t, s, slots)
	ops := map[string]func(*Store, string) error{
		"cooldown": func(s *Store, dim string) error {
			_, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: dim, Until: t0.Add(time.Second)})
			return err
		},
		"sync": func(s *Store, dim string) error {
			_, err := s.Sync(ctx, store.SyncRequest{Now: t0, Dimension: dim, Remaining: 0})
			return err
		},
	}
	closed := reopen(t, s)
	closed.Close()
	for op, f := range ops {
		var ce *store.ConfigurationError
		if err := f(s, "missing"); !errors.As(err, &ce) || ce.Dimension != "missing" {
			t.Errorf("%s on a missing bucket: %v, want a ConfigurationError naming it", op, err)
		}
		err := f(s, "c")
		want := slots.CheckCoolable(op)
		if !errors.Is(err, store.ErrInvalid) || err == nil || err.Error() != want.Error() {
			t.Errorf("%s on a concurrent bucket: %v, want %v", op, err, want)
		}
		if err := f(closed, "c"); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s on a closed store: %v, want ErrClosed", op, err)
		}
	}
	st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"c"}})
	if err != nil || st[0].Tokens != 3_000 || st[0].CooldownUntil != 0 {
		t.Errorf("concurrent bucket after the refused calls = %+v, %v; want unchanged", st, err)
	}
}
