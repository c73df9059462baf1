package vendors_test

import (
	"testing"

	"github.com/ontopix/sluice/vendors"
)

// TestReactorIgnoresAnImplausibleLimit: responses keep reporting a token
// limit of 10 (and 10 remaining) on a 60,000-token bucket. Below the follow
// floor, the report is ignored: the bucket keeps its published limit and
// its balance, and every such response is counted.
func TestReactorIgnoresAnImplausibleLimit(t *testing.T) {
	e := newReactorEnv(t)
	full := e.state(t, e.tpm)
	r := e.reactor()
	absurd := header("x-ratelimit-limit-tokens", "10", "x-ratelimit-remaining-tokens", "10")
	for i := range 3 {
		re, err := r.Observe(e.ctx, 200, absurd, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(re.Ignored) != 1 || re.Ignored[0] != e.tpm || len(re.Resized) != 0 || len(re.Synced) != 0 {
			t.Fatalf("response %d reporting 10: Ignored %v, Resized %v, Synced %v; want %s ignored, nothing applied", i, re.Ignored, re.Resized, re.Synced, e.tpm)
		}
	}
	if got := e.state(t, e.tpm); got.Bucket.Config != full.Bucket.Config || got.Tokens != full.Tokens {
		t.Errorf("bucket after implausible reports: %+v with %d tokens, want %+v with %d", got.Bucket.Config, got.Tokens, full.Bucket.Config, full.Tokens)
	}
	if got := r.IgnoredLimits(); got != 3 {
		t.Errorf("IgnoredLimits() = %d, want 3", got)
	}
	// A plausible report beside it is still followed and synced.
	re := believe(t, r, e.clock, e.profile, header("x-ratelimit-limit-tokens", "30000", "x-ratelimit-remaining-tokens", "20000"))
	if len(re.Ignored) != 0 || len(re.Resized) != 1 || len(re.Synced) != 1 {
		t.Errorf("a report of half the limit: Ignored %v, Resized %v, Synced %v; want it followed and synced", re.Ignored, re.Resized, re.Synced)
	}
	if got := e.state(t, e.tpm).Capacity; got != full.Capacity/2 {
		t.Errorf("capacity after a report of half = %d, want %d", got, full.Capacity/2)
	}
}

// TestReactorFloorIsTheBoundOfPlausible: the follow floor separates a
// report that is followed from one that is ignored.
func TestReactorFloorIsTheBoundOfPlausible(t *testing.T) {
	tests := []struct {
		name    string
		opts    []vendors.ReactorOption
		limit   string
		ignored bool
		want    int64 // capacity of the 60,000 TPM bucket afterwards
	}{
		{"at the default floor: followed", nil, "6000", false, 6_000},
		{"just below it: ignored", nil, "5999", true, 60_000},
		{"a floor of a half ignores a third", []vendors.ReactorOption{vendors.WithFollowFloor(0.5)}, "20000", true, 60_000},
		{"a floor of 1 % follows a fiftieth", []vendors.ReactorOption{vendors.WithFollowFloor(0)}, "1200", false, 1_200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newReactorEnv(t)
			r := e.reactor(tt.opts...)
			re, err := r.Observe(e.ctx, 200, header("x-ratelimit-limit-tokens", tt.limit), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.ignored {
				re = believe(t, r, e.clock, e.profile, header("x-ratelimit-limit-tokens", tt.limit))
			}
			if got := len(re.Ignored) == 1; got != tt.ignored {
				t.Errorf("Ignored %v, want ignored %v", re.Ignored, tt.ignored)
			}
			if got := e.state(t, e.tpm).Capacity; got != tt.want {
				t.Errorf("capacity = %d, want %d", got, tt.want)
			}
		})
	}
}
