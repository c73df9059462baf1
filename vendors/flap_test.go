package vendors_test

import (
	"testing"
	"time"
)

// TestReactorStopsFollowingAFlappingLimit: the token limit header flips
// between half the limit and the full one every 500 ms. No lowering is
// believed (none is reported for a tenth of the window): nothing is
// followed or synced, and the balance is untouched. After two flaps a
// lower report is ignored as unstable, until a rate-limit 429 on tokens
// shows the vendor enforcing something: a lower report is then believed
// at once.
func TestReactorStopsFollowingAFlappingLimit(t *testing.T) {
	e := newReactorEnv(t)
	full := e.state(t, e.tpm)
	r := e.reactor()
	low := header("x-ratelimit-limit-tokens", "30000", "x-ratelimit-remaining-tokens", "100")
	high := header("x-ratelimit-limit-tokens", "60000")
	for i := range 2 {
		re, err := r.Observe(e.ctx, 200, low, nil)
		if err != nil || len(re.Resized) != 0 || len(re.Synced) != 0 || len(re.Unconfirmed) != 1 || re.Unconfirmed[0] != e.tpm {
			t.Fatalf("lowering %d: Resized %v, Synced %v, Unconfirmed %v, %v; want it not believed yet", i+1, re.Resized, re.Synced, re.Unconfirmed, err)
		}
		e.clock.advance(500 * time.Millisecond)
		if re, err = r.Observe(e.ctx, 200, high, nil); err != nil || len(re.Resized) != 0 {
			t.Fatalf("back %d: Resized %v, %v; want nothing to restore", i+1, re.Resized, err)
		}
		e.clock.advance(500 * time.Millisecond)
	}
	if got := e.state(t, e.tpm); got.Bucket.Config != full.Bucket.Config || got.Tokens < full.Tokens {
		t.Fatalf("after two flaps: %+v with %d tokens, want %+v with %d", got.Bucket.Config, got.Tokens, full.Bucket.Config, full.Tokens)
	}
	re, err := r.Observe(e.ctx, 200, low, nil)
	if err != nil || len(re.Resized) != 0 || len(re.Synced) != 0 || len(re.Unstable) != 1 || re.Unstable[0] != e.tpm {
		t.Fatalf("third lowering after two flaps: Resized %v, Synced %v, Unstable %v, %v; want it ignored as unstable", re.Resized, re.Synced, re.Unstable, err)
	}
	// The vendor rate-limits tokens: its headers are heard again, at once.
	if _, err := r.Observe(e.ctx, 429, header("retry-after-ms", "100"), []byte(openAITPM429)); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(time.Second)
	if re, err = r.Observe(e.ctx, 200, low, nil); err != nil || len(re.Resized) != 1 || len(re.Unstable) != 0 || len(re.Unconfirmed) != 0 {
		t.Errorf("a lowering after a tokens 429: Resized %v, Unstable %v, Unconfirmed %v, %v; want it followed", re.Resized, re.Unstable, re.Unconfirmed, err)
	}
}

// TestReactorBelievesALowerLimitThatPersists: a lower limit reported for
// a tenth of the window is followed, and the remaining beside it synced;
// one reported for less is not.
func TestReactorBelievesALowerLimitThatPersists(t *testing.T) {
	e := newReactorEnv(t)
	r := e.reactor()
	low := header("x-ratelimit-limit-tokens", "30000", "x-ratelimit-remaining-tokens", "20000")
	for _, tt := range []struct {
		after        time.Duration
		believed     bool
		wantCapacity int64
	}{
		{0, false, 60_000},
		{settle(e.profile) - time.Millisecond, false, 60_000},
		{time.Millisecond, true, 30_000},
	} {
		e.clock.advance(tt.after)
		re, err := r.Observe(e.ctx, 200, low, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(re.Resized) == 1 && len(re.Synced) == 1; got != tt.believed {
			t.Errorf("after %v more: Resized %v, Synced %v; want believed %v", tt.after, re.Resized, re.Synced, tt.believed)
		}
		if got := e.state(t, e.tpm).Capacity; got != tt.wantCapacity {
			t.Errorf("after %v more: capacity %d, want %d", tt.after, got, tt.wantCapacity)
		}
	}
	if got := e.state(t, e.tpm).Tokens.Tokens(); got != 20_000 {
		t.Errorf("balance = %v, want 20000 (synced once believed)", got)
	}
}

// TestReactorFollowsAnOutage: one lowering for 30 s, then the full limit
// again (the vendor's pool shrank for a while), twice two minutes apart:
// no flap within two windows, every lowering believed after a tenth of
// the window and followed.
func TestReactorFollowsAnOutage(t *testing.T) {
	e := newReactorEnv(t)
	r := e.reactor()
	for i := range 2 {
		re := believe(t, r, e.clock, e.profile, header("x-ratelimit-limit-tokens", "30000"))
		if len(re.Resized) != 1 {
			t.Fatalf("outage %d: Resized %v; want the lower limit followed", i+1, re.Resized)
		}
		e.clock.advance(30 * time.Second)
		re, err := r.Observe(e.ctx, 200, header("x-ratelimit-limit-tokens", "60000"), nil)
		if err != nil || len(re.Resized) != 1 {
			t.Fatalf("end of outage %d: Resized %v, %v", i+1, re.Resized, err)
		}
		e.clock.advance(2 * time.Minute)
	}
}
