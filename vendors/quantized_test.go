package vendors_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
)

const openAIRPM429 = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 600, Used 600, Requested 1. Please try again in 100ms.","type":"requests","code":"rate_limit_exceeded"}}`

// checkCut checks that got is full, a requests bucket of the profile
// under a vendor bucket of burst requests (its second's worth), with its
// burst cut: one request of capacity, and a rate at which one request
// plus a second's refill, and the refill over the arrival jitter full
// absorbed, stays within burst — but not much slower.
func checkCut(t *testing.T, full, got bucket.Config, burst float64) {
	t.Helper()
	checkCutAt(t, full, got, burst, 1)
}

// checkCutAt is checkCut for a cut widened to level: the arrival jitter
// absorbed is full's (at least 50 ms above level 1) doubled at each level
// above the first.
func checkCutAt(t *testing.T, full, got bucket.Config, burst float64, level int) {
	t.Helper()
	rate := func(c bucket.Config) float64 { return float64(c.RefillAmount) / c.RefillPeriod.Seconds() }
	jitter := (burst - float64(full.Capacity)) / rate(full) // seconds full absorbs
	if level > 1 {
		jitter = max(jitter, 0.050) * float64(int(1)<<(level-1))
	}
	if got.Capacity != 1 || got.Type != full.Type || got.RefillAmount != full.RefillAmount || got.MaxDebt != full.MaxDebt {
		t.Fatalf("cut config %+v; want %+v with capacity 1", got, full)
	}
	if most := 1 + rate(got)*(1+jitter); most > burst {
		t.Errorf("cut config %+v: up to %.3f requests arrive within a second, more than the vendor's %.3f", got, most, burst)
	}
	if want := (burst - 1) / (1 + jitter); rate(got) < 0.999*want {
		t.Errorf("cut config %+v refills %.3f a second, want about %.3f", got, rate(got), want)
	}
}

// TestReactorCutsTheBurstAfterARequests429: a rate-limit 429 on requests
// cuts the requests bucket's burst to one request, at a lower rate, for
// two windows from the last such 429; then the burst is given back.
func TestReactorCutsTheBurstAfterARequests429(t *testing.T) {
	e := newReactorEnv(t)
	r := e.reactor()
	full := e.state(t, e.rpm).Bucket.Config
	if full.Capacity < 2 {
		t.Fatalf("the profile's requests bucket holds %d; the test needs a burst", full.Capacity)
	}
	re, err := r.Observe(e.ctx, 429, header("retry-after-ms", "100"), []byte(openAIRPM429))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(re.Resized, e.rpm) {
		t.Fatalf("Resized = %v, want %s", re.Resized, e.rpm)
	}
	checkCut(t, full, e.state(t, e.rpm).Bucket.Config, 10)
	if got := e.state(t, e.tpm).Bucket.Config.Capacity; got == 1 {
		t.Errorf("the tokens bucket's capacity = 1; only requests are cut")
	}
	e.clock.advance(time.Minute)
	if _, err := r.Observe(e.ctx, 429, header("retry-after-ms", "100"), []byte(openAIRPM429)); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(2*time.Minute - time.Millisecond)
	re, err = r.Observe(e.ctx, 200, header(), nil)
	if err != nil || len(re.Resized) != 0 {
		t.Fatalf("two windows less 1 ms after the last 429: Resized %v, %v; want the burst still cut", re.Resized, err)
	}
	e.clock.advance(time.Millisecond)
	re, err = r.Observe(e.ctx, 200, header(), nil)
	if err != nil || !slices.Contains(re.Resized, e.rpm) {
		t.Fatalf("two windows after the last 429: Resized %v, %v; want the burst back", re.Resized, err)
	}
	if got := e.state(t, e.rpm).Bucket.Config; got != full {
		t.Errorf("config = %+v, want the profile's %+v", got, full)
	}
}

// TestReactorCutsTheBurstOfAFollowedLimit: the cut applies to the bucket
// following a lower reported limit, and giving the burst back keeps the
// lower limit.
func TestReactorCutsTheBurstOfAFollowedLimit(t *testing.T) {
	e := newReactorEnv(t)
	r := e.reactor()
	believe(t, r, e.clock, e.profile, header("x-ratelimit-limit-requests", "300"))
	half := e.state(t, e.rpm).Bucket.Config
	lower := header("x-ratelimit-limit-requests", "300")
	if _, err := r.Observe(e.ctx, 429, header("retry-after-ms", "100", "x-ratelimit-limit-requests", "300"), []byte(openAIRPM429)); err != nil {
		t.Fatal(err)
	}
	checkCut(t, half, e.state(t, e.rpm).Bucket.Config, 5)
	e.clock.advance(2 * time.Minute)
	if _, err := r.Observe(e.ctx, 200, lower, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.state(t, e.rpm).Bucket.Config; got != half {
		t.Errorf("config = %+v, want the followed %+v", got, half)
	}
}

// TestReactorNeverCutsAnOperatorsBurst: a requests bucket an operator
// configured is left as it is.
func TestReactorNeverCutsAnOperatorsBurst(t *testing.T) {
	e := newReactorEnv(t)
	cfg := e.state(t, e.rpm).Bucket.Config
	cfg.Capacity = 5
	if err := e.client.PutBucket(e.ctx, sluice.Bucket{Name: e.rpm, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	re, err := e.reactor().Observe(e.ctx, 429, header("retry-after-ms", "100"), []byte(openAIRPM429))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.state(t, e.rpm).Bucket.Config; got != cfg || slices.Contains(re.Resized, e.rpm) {
		t.Errorf("config %+v, Resized %v; want the operator's %+v untouched", got, re.Resized, cfg)
	}
}

// TestReactorKeepsABurstAnotherProcessCut: a process that sees the
// published limit for the first time (its follow check puts the bucket
// at the limit) leaves a burst another process cut as it is; that process
// gives it back.
func TestReactorKeepsABurstAnotherProcessCut(t *testing.T) {
	e := newReactorEnv(t)
	full := e.state(t, e.rpm).Bucket.Config
	cutter, other := e.reactor(), e.reactor()
	if _, err := cutter.Observe(e.ctx, 429, header("retry-after-ms", "100"), []byte(openAIRPM429)); err != nil {
		t.Fatal(err)
	}
	cutCfg := e.state(t, e.rpm).Bucket.Config
	checkCut(t, full, cutCfg, 10)
	re, err := other.Observe(e.ctx, 200, header("x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "599"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.state(t, e.rpm).Bucket.Config; got != cutCfg || slices.Contains(re.Resized, e.rpm) {
		t.Fatalf("after another process's first response: config %+v, Resized %v; want the cut %+v kept", got, re.Resized, cutCfg)
	}
	e.clock.advance(2 * time.Minute)
	if _, err := other.Observe(e.ctx, 200, header(), nil); err != nil {
		t.Fatal(err)
	}
	if got := e.state(t, e.rpm).Bucket.Config; got != cutCfg {
		t.Fatalf("the other process after two windows: config %+v, want the cut %+v kept (not its to give back)", got, cutCfg)
	}
	if _, err := cutter.Observe(e.ctx, 200, header(), nil); err != nil {
		t.Fatal(err)
	}
	if got := e.state(t, e.rpm).Bucket.Config; got != full {
		t.Errorf("the cutting process after two windows: config %+v, want the profile's %+v", got, full)
	}
}

// TestReactorWidensACutThatStillDraws429s: a 429 on requests while the
// cut is in place, 2 s or more after it was put, widens the room for
// arrival jitter (twice as much each time, three levels in all); one
// sooner (a request admitted before the cut, still on its way) does not.
// Giving the burst back forgets the widening.
func TestReactorWidensACutThatStillDraws429s(t *testing.T) {
	e := newReactorEnv(t)
	r := e.reactor()
	full := e.state(t, e.rpm).Bucket.Config
	observe429 := func() {
		t.Helper()
		if _, err := r.Observe(e.ctx, 429, header("retry-after-ms", "100"), []byte(openAIRPM429)); err != nil {
			t.Fatal(err)
		}
	}
	observe429()
	checkCutAt(t, full, e.state(t, e.rpm).Bucket.Config, 10, 1)
	e.clock.advance(time.Second)
	observe429()
	checkCutAt(t, full, e.state(t, e.rpm).Bucket.Config, 10, 1)
	for _, level := range []int{2, 3, 3} {
		e.clock.advance(2 * time.Second)
		observe429()
		checkCutAt(t, full, e.state(t, e.rpm).Bucket.Config, 10, level)
	}
	e.clock.advance(2 * time.Minute)
	if _, err := r.Observe(e.ctx, 200, header(), nil); err != nil {
		t.Fatal(err)
	}
	if got := e.state(t, e.rpm).Bucket.Config; got != full {
		t.Fatalf("two windows after the last 429: config %+v, want the profile's %+v", got, full)
	}
	observe429()
	checkCutAt(t, full, e.state(t, e.rpm).Bucket.Config, 10, 1)
}

// TestReactorKeepsAWiderCutAnotherProcessPut: a process whose own 429
// cuts the burst leaves a wider cut another process put as it is.
func TestReactorKeepsAWiderCutAnotherProcessPut(t *testing.T) {
	e := newReactorEnv(t)
	full := e.state(t, e.rpm).Bucket.Config
	cutter, other := e.reactor(), e.reactor()
	for range 2 {
		if _, err := cutter.Observe(e.ctx, 429, header("retry-after-ms", "100"), []byte(openAIRPM429)); err != nil {
			t.Fatal(err)
		}
		e.clock.advance(2 * time.Second)
	}
	wide := e.state(t, e.rpm).Bucket.Config
	checkCutAt(t, full, wide, 10, 2)
	if _, err := other.Observe(e.ctx, 429, header("retry-after-ms", "100"), []byte(openAIRPM429)); err != nil {
		t.Fatal(err)
	}
	if got := e.state(t, e.rpm).Bucket.Config; got != wide {
		t.Errorf("after another process's 429: config %+v, want the wider cut %+v kept", got, wide)
	}
}
