package vendors_test

import (
	"testing"
	"time"
)

// TestReactorStopsFollowingAFlappingLimit: the token limit header flips
// between half the limit and the full one every 500 ms. The first two
// lowerings are followed; after those two flaps a lower report is neither
// followed nor synced, until a rate-limit 429 on tokens shows the vendor
// enforcing something.
func TestReactorStopsFollowingAFlappingLimit(t *testing.T) {
	e := newReactorEnv(t)
	full := e.state(t, e.tpm).Bucket.Config
	r := e.reactor()
	low := header("x-ratelimit-limit-tokens", "30000", "x-ratelimit-remaining-tokens", "100")
	high := header("x-ratelimit-limit-tokens", "60000")
	for i := range 2 {
		re, err := r.Observe(e.ctx, 200, low, nil)
		if err != nil || len(re.Resized) != 1 || len(re.Unstable) != 0 {
			t.Fatalf("lowering %d: Resized %v, Unstable %v, %v; want it followed", i+1, re.Resized, re.Unstable, err)
		}
		e.clock.advance(500 * time.Millisecond)
		if re, err = r.Observe(e.ctx, 200, high, nil); err != nil || len(re.Resized) != 1 {
			t.Fatalf("restore %d: Resized %v, %v; want the published limit back", i+1, re.Resized, err)
		}
		e.clock.advance(500 * time.Millisecond)
	}
	before := e.state(t, e.tpm).Tokens
	re, err := r.Observe(e.ctx, 200, low, nil)
	if err != nil || len(re.Resized) != 0 || len(re.Synced) != 0 || len(re.Unstable) != 1 || re.Unstable[0] != e.tpm {
		t.Fatalf("third lowering after two flaps: Resized %v, Synced %v, Unstable %v, %v; want it ignored as unstable", re.Resized, re.Synced, re.Unstable, err)
	}
	if got := e.state(t, e.tpm); got.Bucket.Config != full || got.Tokens < before {
		t.Fatalf("after an unstable report: %+v with %d tokens, want %+v with at least %d", got.Bucket.Config, got.Tokens, full, before)
	}
	// The vendor rate-limits tokens: its headers are heard again.
	if _, err := r.Observe(e.ctx, 429, header("retry-after-ms", "100"), []byte(openAITPM429)); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(time.Second)
	if re, err = r.Observe(e.ctx, 200, low, nil); err != nil || len(re.Resized) != 1 || len(re.Unstable) != 0 {
		t.Errorf("a lowering after a tokens 429: Resized %v, Unstable %v, %v; want it followed", re.Resized, re.Unstable, err)
	}
}

// TestReactorFollowsAnOutage: one lowering for 30 s, then the full limit
// again (the vendor's pool shrank for a while), twice two minutes apart:
// no flap within two windows, every report followed.
func TestReactorFollowsAnOutage(t *testing.T) {
	e := newReactorEnv(t)
	r := e.reactor()
	for i := range 2 {
		re, err := r.Observe(e.ctx, 200, header("x-ratelimit-limit-tokens", "30000"), nil)
		if err != nil || len(re.Resized) != 1 {
			t.Fatalf("outage %d: Resized %v, %v; want the lower limit followed", i+1, re.Resized, err)
		}
		e.clock.advance(30 * time.Second)
		if re, err = r.Observe(e.ctx, 200, header("x-ratelimit-limit-tokens", "60000"), nil); err != nil || len(re.Resized) != 1 {
			t.Fatalf("end of outage %d: Resized %v, %v", i+1, re.Resized, err)
		}
		e.clock.advance(2 * time.Minute)
	}
}
