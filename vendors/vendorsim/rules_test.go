package vendorsim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseRules(t *testing.T) {
	tests := []struct {
		in   string
		want Rules
	}{
		{"", Rules{}},
		{"vendor", Rules{}},
		{"window=sliding", Rules{Window: WindowSliding}},
		{"window=fixed,requests=10s", Rules{Window: WindowFixed, RequestInterval: 10 * time.Second}},
		{"requests=1m, headers=flap", Rules{RequestInterval: time.Minute, Headers: HeadersFlap}},
		{"window=bucket,headers=absurd,retry-after=absurd", Rules{Window: WindowTokenBucket, Headers: HeadersAbsurd, AbsurdRetryAfter: true}},
		{"headers=double,requests=vendor,retry-after=true", Rules{Headers: HeadersDouble}},
		{"reading=admission_kept", Rules{Reading: AdmissionKept}},
		{"window=fixed,reading=adjusted_to_usage", Rules{Window: WindowFixed, Reading: AdjustedToUsage}},
		{"reading=vendor", Rules{}},
	}
	for _, tt := range tests {
		got, err := ParseRules(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseRules(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			continue
		}
		back, err := ParseRules(got.String())
		if err != nil || back != got {
			t.Errorf("ParseRules(%q.String() = %q) = %+v, %v; want %+v", tt.in, got.String(), back, err, got)
		}
	}
}

func TestParseRulesErrors(t *testing.T) {
	tests := []struct {
		in, field string
	}{
		{"window", "Rules"},
		{"window=calendar", "Rules.Window"},
		{"requests=500ms", "Rules.RequestInterval"},
		{"requests=2m", "Rules.RequestInterval"},
		{"requests=soon", "Rules.RequestInterval"},
		{"headers=lies", "Rules.Headers"},
		{"retry-after=never", "Rules.AbsurdRetryAfter"},
		{"tokens=fixed", "Rules"},
		{"reading=kept", "Rules.Reading"},
	}
	for _, tt := range tests {
		_, err := ParseRules(tt.in)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, ErrConfig) {
			t.Errorf("ParseRules(%q) = %v, want a *FieldError for %s", tt.in, err, tt.field)
		}
	}
	if _, err := New(Config{Vendor: OpenAI, Rules: Rules{Window: 9}}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Rules.Window") {
		t.Errorf("New with Rules.Window 9: %v, want an error naming Rules.Window", err)
	}
}

func FuzzParseRules(f *testing.F) {
	for _, s := range []string{"", "vendor", "window=sliding,requests=10s", "headers=flap,retry-after=absurd", "requests=1m0s", "a=b,c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRules(s)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("ParseRules(%q): %v does not match ErrConfig", s, err)
			}
			return
		}
		back, err := ParseRules(r.String())
		if err != nil || back != r {
			t.Fatalf("ParseRules(%q) = %+v, whose String %q parses as %+v, %v", s, r, r.String(), back, err)
		}
	})
}

// Under a sliding window, what was admitted frees its share one window
// later, never at a calendar boundary.
func TestSlidingWindowRequests(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: OpenAI, Limits: Limits{RPM: 60}, Rules: Rules{Window: WindowSliding, RequestInterval: 10 * time.Second}})
	clk.Add(5 * time.Second) // mid-way through a calendar window
	for range 10 {           // 60 per minute is 10 per 10 s
		wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusOK)
	}
	w := post(t, s, PathChatCompletions, chatBody(1, 10))
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeader(t, w, "Retry-After-Ms", "10000")
	wantHeader(t, w, "X-Ratelimit-Remaining-Requests", "0")
	clk.Add(5 * time.Second) // a calendar boundary: nothing frees
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusTooManyRequests)
	clk.Add(5 * time.Second) // ten seconds after the burst
	for range 10 {
		wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusOK)
	}
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusTooManyRequests)
	if ms := metricStats(t, s, MetricRequests); ms.Counted != 20 || ms.Allowance != 20 {
		t.Errorf("requests counted %d, allowance %d; want 20 and 20", ms.Counted, ms.Allowance)
	}
}

// Under fixed windows, a window's worth just before a boundary and another
// just after it both pass: twice the limit within moments.
func TestFixedWindowTokens(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: OpenAI, Limits: Limits{TPM: 1000}, Rules: Rules{Window: WindowFixed}})
	clk.Add(time.Minute - time.Second)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(400, 600)), http.StatusOK)
	w := post(t, s, PathChatCompletions, chatBody(400, 600))
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeader(t, w, "Retry-After", "1")
	clk.Add(time.Second)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(400, 600)), http.StatusOK)
}

// A sliding window's refund gives back the units counted last, and what
// was refunded does not free again when the original units leave.
func TestSlidingWindowRefund(t *testing.T) {
	w := newSlidingWindow(time.Minute, 1000, epoch)
	w.take(600)
	w.advance(epoch.Add(10 * time.Second))
	w.take(300)
	w.take(-400) // the 300 and 100 of the 600
	if w.sum != 500 || !w.has(500) || w.has(501) {
		t.Fatalf("after a refund of 400: sum %d, want 500 and room for exactly 500", w.sum)
	}
	w.advance(epoch.Add(time.Minute))
	if w.sum != 0 {
		t.Errorf("a minute after the 600: sum %d, want 0", w.sum)
	}
	if got := w.waitFor(1); got != 0 {
		t.Errorf("waitFor(1) on an empty window = %v, want 0", got)
	}
}

func TestHeaderRules(t *testing.T) {
	tests := []struct {
		rule      HeaderRule
		at        time.Duration
		limit     string
		remaining string
	}{
		{HeadersTrue, 0, "1000", "1000"},
		{HeadersFlap, 0, "1000", "1000"},
		{HeadersFlap, FlapPeriod, "500", "500"},
		{HeadersFlap, 2 * FlapPeriod, "1000", "1000"},
		{HeadersAbsurd, 0, "10", "10"},
		{HeadersDouble, 0, "2000", "1000"},
	}
	for _, tt := range tests {
		s, clk := newSim(t, Config{Vendor: OpenAI, Limits: Limits{TPM: 1000}, Rules: Rules{Headers: tt.rule}})
		clk.Add(tt.at)
		w := post(t, s, PathChatCompletions, chatBody(1, 10))
		wantStatus(t, w, http.StatusOK)
		if got := w.Header().Get("X-Ratelimit-Limit-Tokens"); got != tt.limit {
			t.Errorf("headers %v at %v: limit %s, want %s", tt.rule, tt.at, got, tt.limit)
		}
		// The call's charge (max_tokens 10 + its prompt) is taken first.
		if got := w.Header().Get("X-Ratelimit-Remaining-Tokens"); tt.remaining == "1000" && got == tt.remaining {
			t.Errorf("headers %v at %v: remaining %s, want less than the limit after a call", tt.rule, tt.at, got)
		}
	}
}

func TestAbsurdRetryAfter(t *testing.T) {
	s, _ := newSim(t, Config{Vendor: OpenAI, Limits: Limits{RPM: 60}, Rules: Rules{AbsurdRetryAfter: true}})
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusOK)
	w := post(t, s, PathChatCompletions, chatBody(1, 10))
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeader(t, w, "Retry-After", "86400")
	wantHeader(t, w, "Retry-After-Ms", "86400000")
}

// TestWindowRulesNeverAdmitMoreThanTheRule sends random request sequences
// under the calendar and sliding readings of the request limit and checks
// from outside, against the reading's own definition: at most the limit
// in any interval of the window's length (sliding), or in any calendar
// window (fixed).
func TestWindowRulesNeverAdmitMoreThanTheRule(t *testing.T) {
	for seed := range uint64(20) {
		for _, w := range []Window{WindowFixed, WindowSliding} {
			t.Run(fmt.Sprintf("%s/%d", w, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 11))
				rpm := 30 + r.Int64N(600)
				interval := []time.Duration{time.Second, 10 * time.Second, time.Minute}[r.IntN(3)]
				limit := scaleTo(rpm, interval, time.Minute)
				s, clk := newSim(t, Config{Vendor: OpenAI, Limits: Limits{RPM: rpm}, Seed: seed,
					Rules: Rules{Window: w, RequestInterval: interval}})
				var at []time.Duration
				var elapsed time.Duration
				for range 400 {
					d := time.Duration(r.Int64N(int64(interval / 8)))
					if r.IntN(20) == 0 {
						d = time.Duration(r.Int64N(int64(2 * interval)))
					}
					clk.Add(d)
					elapsed += d
					if post(t, s, PathChatCompletions, chatBody(1, 10)).Code == http.StatusOK {
						at = append(at, elapsed)
					}
				}
				for i := range at {
					n := int64(0)
					for j := i; j < len(at); j++ {
						in := at[j]-at[i] < interval // sliding: within one window's length
						if w == WindowFixed {
							in = (epoch.Add(at[j]).UnixNano() / int64(interval)) == (epoch.Add(at[i]).UnixNano() / int64(interval))
						}
						if in {
							n++
						}
					}
					if n > limit {
						t.Fatalf("%d requests admitted in the %v window from %v, more than %d (RPM %d)", n, interval, at[i], limit, rpm)
					}
				}
				if len(at) == 0 {
					t.Fatal("nothing admitted")
				}
			})
		}
	}
}
