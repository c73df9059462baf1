package vendors_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
)

const openAIRPM429 = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 600, Used 600, Requested 1. Please try again in 100ms.","type":"requests","code":"rate_limit_exceeded"}}`

// cut is cfg with its burst cut to one request.
func cut(cfg bucket.Config) bucket.Config {
	cfg.Capacity = 1
	cfg.CostPerCall = min(cfg.CostPerCall, 1)
	return cfg
}

// TestReactorCutsTheBurstAfterARequests429: a rate-limit 429 on requests
// cuts the requests bucket's burst to one request at the same rate, for
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
	if got, want := e.state(t, e.rpm).Bucket.Config, cut(full); got != want {
		t.Fatalf("after the 429: config %+v, want %+v", got, want)
	}
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
	if got, want := e.state(t, e.rpm).Bucket.Config, cut(half); got != want {
		t.Fatalf("after the 429: config %+v, want %+v", got, want)
	}
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
	re, err := other.Observe(e.ctx, 200, header("x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "599"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.state(t, e.rpm).Bucket.Config, cut(full); got != want || slices.Contains(re.Resized, e.rpm) {
		t.Fatalf("after another process's first response: config %+v, Resized %v; want the cut %+v kept", got, re.Resized, want)
	}
	e.clock.advance(2 * time.Minute)
	if _, err := other.Observe(e.ctx, 200, header(), nil); err != nil {
		t.Fatal(err)
	}
	if got, want := e.state(t, e.rpm).Bucket.Config, cut(full); got != want {
		t.Fatalf("the other process after two windows: config %+v, want the cut %+v kept (not its to give back)", got, want)
	}
	if _, err := cutter.Observe(e.ctx, 200, header(), nil); err != nil {
		t.Fatal(err)
	}
	if got := e.state(t, e.rpm).Bucket.Config; got != full {
		t.Errorf("the cutting process after two windows: config %+v, want the profile's %+v", got, full)
	}
}
