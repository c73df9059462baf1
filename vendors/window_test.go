package vendors_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/vendors"
)

// tokensReport is OpenAI's token headers: limit, remaining and the reset
// as a Go duration from now.
func tokensReport(limit, remaining string, reset time.Duration) http.Header {
	return header("x-ratelimit-limit-tokens", limit, "x-ratelimit-remaining-tokens", remaining,
		"x-ratelimit-reset-tokens", reset.String())
}

// TestReactorHoldsACalendarCount: the TPM bucket (60,000 a minute, no
// headroom, 1,000 tokens a second) is reported twice, 3 s apart, by a
// vendor whose reset is the end of a calendar minute whatever remains.
// One report changes nothing beyond the usual sync; the second, naming
// the same end, bounds what the bucket grants before it by the remaining
// value, by a sync below it or a hold.
func TestReactorHoldsACalendarCount(t *testing.T) {
	tests := []struct {
		name      string
		first     http.Header // at 0
		second    http.Header // at 3 s
		wantHeld  bool
		wantAfter float64       // the balance after the second report
		retryIn   time.Duration // a 1-token acquisition's wait after it (0: granted)
	}{
		{"refill above the remaining: held",
			tokensReport("60000", "5000", 30*time.Second), tokensReport("60000", "4000", 27*time.Second),
			true, 0, 23*time.Second + time.Millisecond}, // held 27 s − 4,000 tokens at 1,000/s, then 1 ms for the token
		{"balance and refill above the remaining: synced below it",
			tokensReport("60000", "40000", 13*time.Second), tokensReport("60000", "40000", 10*time.Second),
			true, 30_000, 0}, // 40,000 − 10 s of refill
		{"a bucket's resets",
			tokensReport("60000", "30000", 30*time.Second), tokensReport("60000", "27000", 33*time.Second),
			false, 27_000, 0},
		{"two ends of window",
			tokensReport("60000", "5000", 30*time.Second), tokensReport("60000", "4000", 17*time.Second),
			false, 4_000, 0},
		{"a window just begun, or a sliding one",
			tokensReport("60000", "5000", 59*time.Second), tokensReport("60000", "4000", 56*time.Second+500*time.Millisecond),
			false, 4_000, 0},
		{"a limit above the published one",
			tokensReport("120000", "5000", 30*time.Second), tokensReport("120000", "4000", 27*time.Second),
			false, 4_000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newReactorEnv(t)
			r := e.reactor()
			re, err := r.Observe(e.ctx, 200, tt.first, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(re.Held) != 0 {
				t.Fatalf("one report: Held %v; want nothing held yet", re.Held)
			}
			e.clock.advance(3 * time.Second)
			re, err = r.Observe(e.ctx, 200, tt.second, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(re.Held, e.tpm); got != tt.wantHeld {
				t.Fatalf("Held %v; want %s held: %v", re.Held, e.tpm, tt.wantHeld)
			}
			if got := e.state(t, e.tpm).Tokens.Tokens(); got != tt.wantAfter {
				t.Errorf("balance = %v, want %v", got, tt.wantAfter)
			}
			res, err := e.client.Acquire(e.ctx, e.tpm, sluice.WithCost(1))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.RetryIn; got != tt.retryIn {
				t.Errorf("a 1-token acquisition: RetryIn %v, want %v", got, tt.retryIn)
			}
		})
	}
}

// TestReactorCalendarHoldEarnsTheRemaining: a held dimension refills to
// the remaining value by the reset and no further, and the hold is not
// applied again by the reports that follow within the window.
func TestReactorCalendarHoldEarnsTheRemaining(t *testing.T) {
	e := newReactorEnv(t)
	r := e.reactor()
	for _, h := range []http.Header{tokensReport("60000", "5000", 30*time.Second), tokensReport("60000", "4000", 27*time.Second)} {
		if _, err := r.Observe(e.ctx, 200, h, nil); err != nil {
			t.Fatal(err)
		}
		e.clock.advance(3 * time.Second)
	}
	// 6 s in: the reset is 24 s away and 4,000 tokens remain.
	re, err := r.Observe(e.ctx, 200, tokensReport("60000", "4000", 24*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(re.Held) != 1 || len(re.Cooled) != 0 {
		t.Errorf("a third report: Held %v, Cooled %v; want %s held, no cooldown", re.Held, re.Cooled, e.tpm)
	}
	e.clock.advance(24 * time.Second)
	if got := e.state(t, e.tpm).Tokens.Tokens(); got != 4_000 {
		t.Errorf("balance at the reset = %v, want 4000", got)
	}
}

// TestReactorCalendarHoldNeedsSync: WithoutSync leaves the balance alone
// whatever the resets show.
func TestReactorCalendarHoldNeedsSync(t *testing.T) {
	e := newReactorEnv(t)
	r := e.reactor(vendors.WithoutSync())
	for _, h := range []http.Header{tokensReport("60000", "5000", 30*time.Second), tokensReport("60000", "4000", 27*time.Second)} {
		re, err := r.Observe(e.ctx, 200, h, nil)
		if err != nil || len(re.Held) != 0 {
			t.Fatalf("Held %v, %v; want nothing", re.Held, err)
		}
		e.clock.advance(3 * time.Second)
	}
	if got := e.state(t, e.tpm).Tokens.Tokens(); got != 60_000 {
		t.Errorf("balance = %v, want 60000", got)
	}
}
