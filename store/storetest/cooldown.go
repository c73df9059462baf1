package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// testCooldown covers Cooldown: its results and the state after it, no
// grant before its end and grants at the refill rate from then on, refunds
// during it, a reset ending it, a later cooldown never shortened by an
// earlier one, the decision time of a caller slightly behind, and errors.
func testCooldown(t *testing.T, h Harness) {
	tests := []struct {
		name          string
		take          int64 // from openai#rpm (100/min, one token per 600 ms) at +0
		debt          int64 // then charged into debt on openai#tpm instead, when > 0
		first         int64 // end of a cooldown started at +0, when > 0
		at, until     int64
		before, after int64
		wantUntil     int64
	}{
		{"a full bucket drops to zero", 0, 0, 0, 1000, 6000, 100_000, 0, 6000},
		{"refills first", 40, 0, 0, 3000, 8000, 65_000, 0, 8000},
		{"debt is kept", 0, 500, 0, 0, 5000, -500_000, -500_000, 5000},
		{"a later running end is kept", 0, 0, 9000, 100, 5000, 0, 0, 9000},
		{"an earlier running end is extended", 0, 0, 3000, 100, 5000, 0, 0, 5000},
		{"24 hours is the longest", 0, 0, 0, 0, ms(store.MaxCooldown), 100_000, 0, ms(store.MaxCooldown)},
	}
	for _, tt := range tests {
		t.Run("results/"+tt.name, func(t *testing.T) {
			e := newEnv(t, h)
			dim := "openai#rpm"
			e.put(0, rpm(dim, 100))
			if tt.debt > 0 {
				dim = e.debt(tt.debt)
			} else if tt.take > 0 {
				e.grant(e.req(0, item(dim, tt.take)))
			}
			if tt.first > 0 {
				e.cooldown(0, dim, tt.first)
			}
			got := e.cooldown(tt.at, dim, tt.until)
			want := store.CooldownResult{Before: tt.before, After: tt.after, Until: At(tt.wantUntil).UnixMilli()}
			if got != want {
				t.Fatalf("Cooldown(+%dms until +%dms) = %+v, want %+v", tt.at, tt.until, got, want)
			}
			st := e.peek(tt.at, dim)
			if st.Tokens != tt.after || st.CooldownUntil != want.Until {
				t.Errorf("Peek after = %d millitokens, cooldown until %d; want %d, %d", st.Tokens, st.CooldownUntil, tt.after, want.Until)
			}
		})
	}

	t.Run("NoGrantBeforeUntilThenOneAtTheRefillRate", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, rpm("openai#rpm", 100))
		e.cooldown(1000, "openai#rpm", 6000)
		for _, tt := range []struct {
			at   int64
			want time.Duration // 0: granted
		}{
			{1000, 5600 * time.Millisecond}, // to the end, then 600 ms to earn one token
			{5999, 601 * time.Millisecond},
			{6000, 600 * time.Millisecond},
			{6599, time.Millisecond},
			{6600, 0},
			{6600, 600 * time.Millisecond}, // no burst: one token at a time
			{7199, time.Millisecond},
			{7200, 0},
		} {
			res := e.acquire(e.req(tt.at, item("openai#rpm", 1)))
			if res.Granted != (tt.want == 0) || res.RetryIn != tt.want {
				t.Errorf("Acquire at +%dms: granted %t, RetryIn %s; want granted %t, RetryIn %s", tt.at, res.Granted, res.RetryIn, tt.want == 0, tt.want)
			}
		}
		if st := e.peek(7200, "openai#rpm"); st.Tokens != 0 || st.CooldownUntil != At(6000).UnixMilli() {
			t.Errorf("Peek at +7200 = %d millitokens, cooldown until %d; want 0, the past end %d kept", st.Tokens, st.CooldownUntil, At(6000).UnixMilli())
		}
	})

	t.Run("OnlyTheCooledDimensionWaits", func(t *testing.T) {
		e := newEnv(t, h)
		a, b := e.twoDims("rpm")
		e.put(0, rpm(a, 100))
		e.put(0, rpm(b, 100))
		e.cooldown(0, a, 3000)
		res := e.acquire(e.req(0, item(a, 1), item(b, 1)))
		if res.Granted || res.RetryIn != 3600*time.Millisecond || res.Items[0].RetryIn != 3600*time.Millisecond || res.Items[1].RetryIn != 0 {
			t.Errorf("Acquire = granted %t, RetryIn %s, items %s/%s; want denied, 3.6s, 3.6s/0s",
				res.Granted, res.RetryIn, res.Items[0].RetryIn, res.Items[1].RetryIn)
		}
		e.wantTokens(0, b, 100_000)
	})

	t.Run("RefundDuringCooldownLiftsAtMostToZero", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, tpm("openai#tpm", 1000)) // one token per 60 ms
		r := e.req(0, item("openai#tpm", 300))
		r.Record = true
		e.grant(r)
		e.settle(0, r.ID, "openai#tpm", 900) // 700 - 900: 200 tokens of debt
		e.cooldown(0, "openai#tpm", 10_000)
		if got, want := e.settle(100, r.ID, "openai#tpm", -1000), (store.Settlement{Held: 200, Applied: -200_000, Remaining: 0}); got != want {
			t.Errorf("refund during the cooldown = %+v, want %+v (the debt repaid, nothing above zero)", got, want)
		}
		e.wantTokens(10_000, "openai#tpm", 0)
		e.wantTokens(10_060, "openai#tpm", 1000)
		if got, want := e.settle(10_060, r.ID, "openai#tpm", -200), (store.Settlement{Held: 0, Applied: -200_000, Remaining: 201_000}); got != want {
			t.Errorf("refund after the cooldown = %+v, want %+v", got, want)
		}
	})

	t.Run("ResetEndsIt", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, rpm("openai#rpm", 100))
		e.cooldown(0, "openai#rpm", 60_000)
		e.put(1000, rpm("openai#rpm", 50)) // a reconfiguration keeps it
		if st := e.peek(1000, "openai#rpm"); st.Tokens != 0 || st.CooldownUntil != At(60_000).UnixMilli() {
			t.Errorf("after reconfiguring: %d millitokens, cooldown until %d; want 0, %d", st.Tokens, st.CooldownUntil, At(60_000).UnixMilli())
		}
		if err := e.s.PutBucket(e.ctx, store.PutBucketRequest{Now: At(2000), Bucket: rpm("openai#rpm", 50), Reset: true}); err != nil {
			t.Fatal(err)
		}
		if st := e.peek(2000, "openai#rpm"); st.Tokens != 50_000 || st.CooldownUntil != 0 {
			t.Errorf("after a reset: %d millitokens, cooldown until %d; want 50000, 0", st.Tokens, st.CooldownUntil)
		}
		e.grant(e.req(2000, item("openai#rpm", 50)))
	})

	t.Run("LaterNotShortenedByEarlier", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, rpm("openai#rpm", 100))
		e.cooldown(0, "openai#rpm", 9000)
		if got := e.cooldown(100, "openai#rpm", 5000); got.Until != At(9000).UnixMilli() {
			t.Errorf("shorter cooldown: Until = %d, want the running %d", got.Until, At(9000).UnixMilli())
		}
		res := e.acquire(e.req(5000, item("openai#rpm", 1)))
		if res.Granted || res.RetryIn != 4600*time.Millisecond {
			t.Errorf("Acquire at +5000: granted %t, RetryIn %s; want denied, 4.6s", res.Granted, res.RetryIn)
		}
	})

	t.Run("CallerSlightlyBehind", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(10_000, rpm("openai#rpm", 100))
		// The decision time is the bucket's +10000, and the cooldown lasts
		// the 1000 ms asked for from there.
		if got := e.cooldown(9_990, "openai#rpm", 10_990); got.Until != At(11_000).UnixMilli() {
			t.Errorf("Cooldown from 10 ms behind: Until = +%dms, want +11000ms", got.Until-Base.UnixMilli())
		}
	})

	t.Run("errors", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("eleven#concurrent", 3))
		e.put(0, rpm("eleven#rpm", 10))
		before := e.snapshot(0)
		cool := func(dim string, until time.Time) error {
			_, err := e.s.Cooldown(e.ctx, store.CooldownRequest{Now: At(0), Dimension: dim, Until: until})
			return err
		}
		wantErr(t, "Cooldown concurrent", cool("eleven#concurrent", At(1000)), store.ErrInvalid, "dimension", "eleven#concurrent")
		err := cool("eleven#nope", At(1000))
		wantErr(t, "Cooldown unknown", err, store.ErrUnknownDimension, "eleven#nope")
		if ce := (*store.ConfigurationError)(nil); !errors.As(err, &ce) || ce.Dimension != "eleven#nope" {
			t.Errorf("Cooldown unknown: error %#v, want *store.ConfigurationError{eleven#nope}", err)
		}
		for _, tt := range []struct {
			why   string
			until time.Time
		}{
			{"until now", At(0)},
			{"until in the past", At(-1000)},
			{"sub-millisecond", At(0).Add(time.Microsecond)},
			{"over 24 hours", At(0).Add(store.MaxCooldown + time.Millisecond)},
		} {
			wantErr(t, "Cooldown "+tt.why, cool("eleven#rpm", tt.until), store.ErrInvalid, "until", tt.until.UTC().Format(time.RFC3339Nano))
		}
		e.unchanged(0, before, "failed Cooldowns")
	})
}

// testSync covers Sync: it lowers a refilled balance to what the vendor
// reports, never raises it, keeps debt and a cooldown, and rejects
// concurrent and unknown dimensions and out-of-range values.
func testSync(t *testing.T, h Harness) {
	tests := []struct {
		name          string
		take          int64 // from openai#rpm (100/min) at +0
		debt          int64 // then charged into debt on openai#tpm instead, when > 0
		at, remaining int64
		before, after int64
	}{
		{"lowers", 0, 0, 0, 40, 100_000, 40_000},
		{"never raises", 90, 0, 0, 40, 10_000, 10_000},
		{"refills first", 100, 0, 6000, 5, 10_000, 5_000},
		{"zero empties", 0, 0, 0, 0, 100_000, 0},
		{"capacity changes nothing", 0, 0, 0, 100, 100_000, 100_000},
		{"debt is kept", 0, 500, 0, 0, -500_000, -500_000},
	}
	for _, tt := range tests {
		t.Run("results/"+tt.name, func(t *testing.T) {
			e := newEnv(t, h)
			dim := "openai#rpm"
			e.put(0, rpm(dim, 100))
			if tt.debt > 0 {
				dim = e.debt(tt.debt)
			} else if tt.take > 0 {
				e.grant(e.req(0, item(dim, tt.take)))
			}
			got, err := e.s.Sync(e.ctx, store.SyncRequest{Now: At(tt.at), Dimension: dim, Remaining: tt.remaining})
			if want := (store.SyncResult{Before: tt.before, After: tt.after}); err != nil || got != want {
				t.Fatalf("Sync(%d at +%dms) = %+v, %v; want %+v", tt.remaining, tt.at, got, err, want)
			}
			e.wantTokens(tt.at, dim, tt.after)
		})
	}

	t.Run("GrantsFromTheSyncedBalance", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, rpm("openai#rpm", 100))
		e.sync(0, "openai#rpm", 40)
		if res := e.acquire(e.req(0, item("openai#rpm", 41))); res.Granted || res.RetryIn != 600*time.Millisecond {
			t.Errorf("Acquire 41 of 40: granted %t, RetryIn %s; want denied, 600ms", res.Granted, res.RetryIn)
		}
		e.grant(e.req(0, item("openai#rpm", 40)))
	})

	t.Run("KeepsACooldown", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, rpm("openai#rpm", 100))
		e.cooldown(0, "openai#rpm", 5000)
		if got := e.sync(100, "openai#rpm", 0); got != (store.SyncResult{}) {
			t.Errorf("Sync during a cooldown = %+v, want 0 before and after", got)
		}
		if st := e.peek(100, "openai#rpm"); st.CooldownUntil != At(5000).UnixMilli() {
			t.Errorf("cooldown until %d after a sync, want %d", st.CooldownUntil, At(5000).UnixMilli())
		}
	})

	t.Run("errors", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("eleven#concurrent", 3))
		e.put(0, rpm("eleven#rpm", 10))
		before := e.snapshot(0)
		sync := func(dim string, remaining int64) error {
			_, err := e.s.Sync(e.ctx, store.SyncRequest{Now: At(0), Dimension: dim, Remaining: remaining})
			return err
		}
		wantErr(t, "Sync concurrent", sync("eleven#concurrent", 1), store.ErrInvalid, "dimension", "eleven#concurrent")
		err := sync("eleven#nope", 1)
		wantErr(t, "Sync unknown", err, store.ErrUnknownDimension, "eleven#nope")
		if ce := (*store.ConfigurationError)(nil); !errors.As(err, &ce) || ce.Dimension != "eleven#nope" {
			t.Errorf("Sync unknown: error %#v, want *store.ConfigurationError{eleven#nope}", err)
		}
		wantErr(t, "Sync negative", sync("eleven#rpm", -1), store.ErrInvalid, "remaining", "-1")
		wantErr(t, "Sync huge", sync("eleven#rpm", bucket.MaxCapacity+1), store.ErrInvalid, "remaining", "1000000000001")
		e.unchanged(0, before, "failed Syncs")
	})
}

// debt creates openai#tpm (1000/min), takes all of it under a recorded
// lease at +0 and charges tokens more into debt; it returns the name.
func (e *env) debt(tokens int64) string {
	e.t.Helper()
	const dim = "openai#tpm"
	e.put(0, tpm(dim, 1000))
	r := e.req(0, item(dim, 1000))
	r.Record = true
	e.grant(r)
	e.settle(0, r.ID, dim, tokens)
	return dim
}

// settle adjusts a recorded lease and fails the test on error.
func (e *env) settle(ms int64, id store.LeaseID, dim string, delta int64) store.Settlement {
	e.t.Helper()
	s, err := e.s.Adjust(e.ctx, store.AdjustRequest{Now: At(ms), ID: id, Recorded: true, Dimension: dim, Delta: delta})
	if err != nil {
		e.t.Fatalf("Adjust(%s, %d at +%dms): %v", dim, delta, ms, err)
	}
	return s
}

// cooldown starts a cooldown at ms until untilMs and fails the test on
// error.
func (e *env) cooldown(ms int64, dim string, untilMs int64) store.CooldownResult {
	e.t.Helper()
	e.caps.need(e.t, "cooldown")
	r, err := e.s.Cooldown(e.ctx, store.CooldownRequest{Now: At(ms), Dimension: dim, Until: At(untilMs)})
	if err != nil {
		e.t.Fatalf("Cooldown(%s at +%dms until +%dms): %v", dim, ms, untilMs, err)
	}
	return r
}

// sync syncs a bucket at ms and fails the test on error.
func (e *env) sync(ms int64, dim string, remaining int64) store.SyncResult {
	e.t.Helper()
	e.caps.need(e.t, "sync")
	r, err := e.s.Sync(e.ctx, store.SyncRequest{Now: At(ms), Dimension: dim, Remaining: remaining})
	if err != nil {
		e.t.Fatalf("Sync(%s, %d at +%dms): %v", dim, remaining, ms, err)
	}
	return r
}
