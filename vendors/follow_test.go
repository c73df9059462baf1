package vendors_test

import (
	"testing"
	"time"

	"github.com/ontopix/sluice"
)

// TestReactorNeverOverridesAnOperatorsBucket: an operator lowered the
// bucket by hand (its refill is not the profile's scaled): no report,
// lower or full, changes it.
func TestReactorNeverOverridesAnOperatorsBucket(t *testing.T) {
	e := newReactorEnv(t)
	cfg := e.state(t, e.tpm).Bucket.Config
	cfg.Capacity = 20_000
	if err := e.client.PutBucket(e.ctx, sluice.Bucket{Name: e.tpm, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	r := e.reactor()
	for _, limit := range []string{"60000", "30000", "10", "60000"} {
		re, err := r.Observe(e.ctx, 200, header("x-ratelimit-limit-tokens", limit), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.state(t, e.tpm).Bucket.Config; got != cfg || len(re.Resized) != 0 {
			t.Fatalf("after a reported limit of %s: config %+v, Resized %v; want the operator's %+v untouched", limit, got, re.Resized, cfg)
		}
	}
}

// TestReactorRestoresAnUnconfirmedLowerLimit: a lower limit that no
// response confirms for two refill periods is dropped.
func TestReactorRestoresAnUnconfirmedLowerLimit(t *testing.T) {
	e := newReactorEnv(t)
	full := e.state(t, e.tpm).Bucket.Config
	r := e.reactor()
	believe(t, r, e.clock, e.profile, header("x-ratelimit-limit-tokens", "30000"))
	e.clock.advance(2 * time.Minute)
	re, err := r.Observe(e.ctx, 200, header(), nil)
	if err != nil || len(re.Resized) != 0 {
		t.Fatalf("two refill periods after the report: Resized %v, %v; want nothing yet", re.Resized, err)
	}
	e.clock.advance(time.Millisecond)
	re, err = r.Observe(e.ctx, 200, header(), nil)
	if err != nil || len(re.Resized) != 1 {
		t.Fatalf("past two refill periods: Resized %v, %v; want the bucket restored", re.Resized, err)
	}
	if got := e.state(t, e.tpm).Bucket.Config; got != full {
		t.Errorf("config = %+v, want %+v", got, full)
	}
}

// TestReactorFollowingKeepsTheDebt: lowering a limit (and so its debt
// floor) never forgives debt, however often the reported limit flaps.
func TestReactorFollowingKeepsTheDebt(t *testing.T) {
	e := newReactorEnv(t)
	res, err := e.client.Acquire(e.ctx, e.tpm, sluice.WithCost(60_000))
	if err != nil || res.Outcome != sluice.Granted {
		t.Fatalf("acquire: %v %v", res.Outcome, err)
	}
	if _, err := res.Lease.Adjust(e.ctx, e.tpm, 50_000); err != nil {
		t.Fatal(err)
	}
	r := e.reactor()
	for _, limit := range []string{"30000", "60000", "6000", "60000"} {
		if _, err := r.Observe(e.ctx, 200, header("x-ratelimit-limit-tokens", limit), nil); err != nil {
			t.Fatal(err)
		}
		if got := e.state(t, e.tpm).Tokens.Tokens(); got != -50_000 {
			t.Fatalf("balance after a reported limit of %s = %v, want -50000", limit, got)
		}
	}
}
