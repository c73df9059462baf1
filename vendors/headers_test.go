package vendors

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// header builds an http.Header from name, value pairs, as net/http would
// (canonical keys).
func header(kv ...string) http.Header {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func count(v int64, name string) Count { return Count{Value: v, Known: true, Header: name} }
func instant(d time.Duration, name string) Instant {
	return Instant{At: testNow.Add(d), Known: true, Header: name}
}

// problemFields returns the Field of every problem, in order.
func problemFields(t *testing.T, s Signals) []string {
	t.Helper()
	var fields []string
	for _, p := range s.Problems {
		var ve *ValueError
		if !errors.As(p, &ve) || !errors.Is(p, ErrUnusableValue) {
			t.Fatalf("problem %v is not a *ValueError", p)
		}
		fields = append(fields, ve.Field)
	}
	return fields
}

func TestParseHeaders(t *testing.T) {
	tests := []struct {
		name     string
		vendor   Vendor
		h        http.Header
		want     map[Metric]MetricSignals
		retry    RetryDelay
		problems []string
	}{{
		name:   "OpenAI documented example",
		vendor: OpenAI,
		h: header("x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
			"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "149984",
			"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"),
		want: map[Metric]MetricSignals{
			Requests: {count(60, "x-ratelimit-limit-requests"), count(59, "x-ratelimit-remaining-requests"), instant(time.Second, "x-ratelimit-reset-requests"), 1},
			Tokens:   {count(150000, "x-ratelimit-limit-tokens"), count(149984, "x-ratelimit-remaining-tokens"), instant(6*time.Minute, "x-ratelimit-reset-tokens"), 1},
		},
	}, {
		name:   "OpenAI usage-based variant equal to the plain one: the plain one wins",
		vendor: OpenAI,
		h: header("x-ratelimit-limit-tokens", "40000", "x-ratelimit-remaining-tokens", "39880", "x-ratelimit-reset-tokens", "180ms",
			"x-ratelimit-limit-tokens_usage_based", "40000", "x-ratelimit-remaining-tokens_usage_based", "39880", "x-ratelimit-reset-tokens_usage_based", "180ms"),
		want: map[Metric]MetricSignals{
			Tokens: {count(40000, "x-ratelimit-limit-tokens"), count(39880, "x-ratelimit-remaining-tokens"), instant(180*time.Millisecond, "x-ratelimit-reset-tokens"), 1},
		},
	}, {
		name:   "OpenAI usage-based variant alone",
		vendor: OpenAI,
		h:      header("x-ratelimit-remaining-tokens_usage_based", "249900", "x-ratelimit-reset-tokens_usage_based", "24ms"),
		want: map[Metric]MetricSignals{
			Tokens: {Remaining: count(249900, "x-ratelimit-remaining-tokens_usage_based"), Reset: instant(24*time.Millisecond, "x-ratelimit-reset-tokens_usage_based"), Granularity: 1},
		},
	}, {
		name:   "OpenAI project tokens exhausted: the most restrictive family wins",
		vendor: OpenAI,
		h: header("x-ratelimit-remaining-tokens", "20000", "x-ratelimit-limit-project-tokens", "60000",
			"x-ratelimit-remaining-project-tokens", "0", "x-ratelimit-reset-project-tokens", "45s"),
		want: map[Metric]MetricSignals{
			Tokens: {count(60000, "x-ratelimit-limit-project-tokens"), count(0, "x-ratelimit-remaining-project-tokens"), instant(45*time.Second, "x-ratelimit-reset-project-tokens"), 1},
		},
	}, {
		name:     "OpenAI 6m0s is a duration; a bare number is not",
		vendor:   OpenAI,
		h:        header("x-ratelimit-reset-tokens", "6m0s", "x-ratelimit-reset-requests", "1782129600"),
		want:     map[Metric]MetricSignals{Requests: {}, Tokens: {Reset: instant(6*time.Minute, "x-ratelimit-reset-tokens")}},
		problems: []string{"x-ratelimit-reset-requests"},
	}, {
		name:   "Azure bare seconds and retry-after-ms",
		vendor: Azure,
		h: header("x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "10",
			"x-ratelimit-limit-tokens", "60000", "x-ratelimit-remaining-tokens", "12000", "x-ratelimit-reset-tokens", "300",
			"retry-after-ms", "644", "retry-after", "1"),
		want: map[Metric]MetricSignals{
			Requests: {count(600, "x-ratelimit-limit-requests"), count(0, "x-ratelimit-remaining-requests"), instant(10*time.Second, "x-ratelimit-reset-requests"), 1},
			Tokens:   {count(60000, "x-ratelimit-limit-tokens"), count(12000, "x-ratelimit-remaining-tokens"), instant(300*time.Second, "x-ratelimit-reset-tokens"), 1},
		},
		retry: RetryDelay{644 * time.Millisecond, true, "retry-after-ms"},
	}, {
		name:     "Azure Responses API sentinels: -1, -1, 0 are unknown, never 0 left",
		vendor:   Azure,
		h:        header("x-ratelimit-limit-tokens", "-1", "x-ratelimit-remaining-tokens", "-1", "x-ratelimit-reset-tokens", "0"),
		want:     map[Metric]MetricSignals{Tokens: {}},
		problems: []string{"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"},
	}, {
		name:     "Azure limit sentinel hides a plausible remaining and reset",
		vendor:   Azure,
		h:        header("x-ratelimit-limit-requests", "0", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "12"),
		want:     map[Metric]MetricSignals{Requests: {}},
		problems: []string{"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"},
	}, {
		name:   "Groq: requests are per day, tokens per minute",
		vendor: Groq,
		h: header("x-ratelimit-limit-requests", "14400", "x-ratelimit-limit-tokens", "18000",
			"x-ratelimit-remaining-requests", "14370", "x-ratelimit-remaining-tokens", "17997",
			"x-ratelimit-reset-requests", "2m59.56s", "x-ratelimit-reset-tokens", "7.66s", "retry-after", "2"),
		want: map[Metric]MetricSignals{
			RequestsPerDay: {count(14400, "x-ratelimit-limit-requests"), count(14370, "x-ratelimit-remaining-requests"), instant(2*time.Minute+59560*time.Millisecond, "x-ratelimit-reset-requests"), 1},
			Tokens:         {count(18000, "x-ratelimit-limit-tokens"), count(17997, "x-ratelimit-remaining-tokens"), instant(7660*time.Millisecond, "x-ratelimit-reset-tokens"), 1},
		},
		retry: RetryDelay{2 * time.Second, true, "retry-after"},
	}, {
		name:   "Anthropic: RFC 3339 resets, token remainders to the thousand",
		vendor: Anthropic,
		h: header("anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49",
			"anthropic-ratelimit-requests-reset", "2026-11-23T14:00:05Z",
			"anthropic-ratelimit-tokens-limit", "90000", "anthropic-ratelimit-tokens-remaining", "72000",
			"anthropic-ratelimit-tokens-reset", "2026-11-23T14:00:20.5Z",
			"anthropic-ratelimit-input-tokens-limit", "50000", "anthropic-ratelimit-input-tokens-remaining", "29000",
			"anthropic-ratelimit-input-tokens-reset", "2026-11-23T15:00:30+01:00",
			"anthropic-ratelimit-output-tokens-limit", "10000", "anthropic-ratelimit-output-tokens-remaining", "0",
			"anthropic-ratelimit-output-tokens-reset", "2026-11-23T14:01:00Z", "retry-after", "30"),
		want: map[Metric]MetricSignals{
			Requests:     {count(50, "anthropic-ratelimit-requests-limit"), count(49, "anthropic-ratelimit-requests-remaining"), instant(5*time.Second, "anthropic-ratelimit-requests-reset"), 1},
			Tokens:       {count(90000, "anthropic-ratelimit-tokens-limit"), count(72000, "anthropic-ratelimit-tokens-remaining"), instant(20500*time.Millisecond, "anthropic-ratelimit-tokens-reset"), 1000},
			InputTokens:  {count(50000, "anthropic-ratelimit-input-tokens-limit"), count(29000, "anthropic-ratelimit-input-tokens-remaining"), instant(30*time.Second, "anthropic-ratelimit-input-tokens-reset"), 1000},
			OutputTokens: {count(10000, "anthropic-ratelimit-output-tokens-limit"), count(0, "anthropic-ratelimit-output-tokens-remaining"), instant(time.Minute, "anthropic-ratelimit-output-tokens-reset"), 1000},
		},
		retry: RetryDelay{30 * time.Second, true, "retry-after"},
	}, {
		name:     "Anthropic reset read as a float is refused, not 2026 ms",
		vendor:   Anthropic,
		h:        header("anthropic-ratelimit-requests-reset", "2026"),
		want:     map[Metric]MetricSignals{Requests: {}},
		problems: []string{"anthropic-ratelimit-requests-reset"},
	}, {
		name:   "Anthropic reset that has just passed: unknown, not a problem",
		vendor: Anthropic,
		h: header("anthropic-ratelimit-requests-remaining", "50", "anthropic-ratelimit-requests-reset", "2026-11-23T13:59:59Z",
			"anthropic-ratelimit-tokens-reset", "2020-01-01T00:00:00Z"),
		want: map[Metric]MetricSignals{
			Requests: {Remaining: count(50, "anthropic-ratelimit-requests-remaining"), Granularity: 1},
			Tokens:   {},
		},
		problems: []string{"anthropic-ratelimit-tokens-reset"},
	}, {
		name:   "OpenRouter: the unsuffixed limit counts requests, reset in epoch ms",
		vendor: OpenRouter,
		h:      header("x-ratelimit-limit", "50", "x-ratelimit-remaining", "49", "x-ratelimit-reset", millis(90*time.Second)),
		want: map[Metric]MetricSignals{
			Requests: {count(50, "x-ratelimit-limit"), count(49, "x-ratelimit-remaining"), instant(90*time.Second, "x-ratelimit-reset"), 1},
		},
	}, {
		name:   "ElevenLabs concurrency",
		vendor: ElevenLabs,
		h:      header("current-concurrent-requests", "3", "maximum-concurrent-requests", "5"),
		want: map[Metric]MetricSignals{
			Concurrent: {Limit: count(5, "maximum-concurrent-requests"), Remaining: count(2, "current-concurrent-requests"), Granularity: 1},
		},
	}, {
		name:   "ElevenLabs over the limit: remaining is zero, not negative",
		vendor: ElevenLabs,
		h:      header("current-concurrent-requests", "7", "maximum-concurrent-requests", "5"),
		want: map[Metric]MetricSignals{
			Concurrent: {Limit: count(5, "maximum-concurrent-requests"), Remaining: count(0, "current-concurrent-requests"), Granularity: 1},
		},
	}, {
		name:     "ElevenLabs bad values",
		vendor:   ElevenLabs,
		h:        header("current-concurrent-requests", "-2", "maximum-concurrent-requests", "0"),
		want:     map[Metric]MetricSignals{Concurrent: {}},
		problems: []string{"maximum-concurrent-requests", "current-concurrent-requests"},
	}, {
		name:   "Gemini: no rate-limit headers are read, retry-after is",
		vendor: Gemini,
		h:      header("x-ratelimit-remaining-requests", "5", "retry-after", "37"),
		retry:  RetryDelay{37 * time.Second, true, "retry-after"},
	}, {
		name:   "unknown vendor: OpenAI names, reset format guessed",
		vendor: Vendor("acme"),
		h:      header("x-ratelimit-remaining-requests", "5", "x-ratelimit-reset-requests", millis(time.Minute), "x-ratelimit-reset-tokens", "12"),
		want: map[Metric]MetricSignals{
			Requests: {Remaining: count(5, "x-ratelimit-remaining-requests"), Reset: instant(time.Minute, "x-ratelimit-reset-requests"), Granularity: 1},
			Tokens:   {Reset: instant(12*time.Second, "x-ratelimit-reset-tokens")},
		},
	}, {
		name:     "unusable retry-after-ms falls back to retry-after",
		vendor:   OpenAI,
		h:        header("retry-after-ms", "soon", "retry-after", "2"),
		retry:    RetryDelay{2 * time.Second, true, "retry-after"},
		problems: []string{"retry-after-ms"},
	}, {
		name:     "retry-after 0 is unknown",
		vendor:   OpenAI,
		h:        header("retry-after", "0"),
		problems: []string{"retry-after"},
	}, {
		name:   "HTTP-date retry-after",
		vendor: Anthropic,
		h:      header("retry-after", testNow.Add(90*time.Second).Format(http.TimeFormat)),
		retry:  RetryDelay{90 * time.Second, true, "retry-after"},
	}, {
		name:     "garbage numbers are unknown, never zero",
		vendor:   OpenAI,
		h:        header("x-ratelimit-limit-requests", "lots", "x-ratelimit-remaining-requests", "1.5", "x-ratelimit-remaining-tokens", "99999999999999999999"),
		want:     map[Metric]MetricSignals{Requests: {}, Tokens: {}},
		problems: []string{"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens"},
	}, {
		name:   "a hand-built header map with lower-case keys",
		vendor: OpenAI,
		h:      http.Header{"x-ratelimit-remaining-requests": {"5"}},
		want:   map[Metric]MetricSignals{Requests: {Remaining: count(5, "x-ratelimit-remaining-requests"), Granularity: 1}},
	}, {
		name:   "no headers",
		vendor: OpenAI,
		h:      nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseHeaders(tt.vendor, tt.h, testNow)
			if got.Vendor != tt.vendor {
				t.Errorf("Vendor = %q, want %q", got.Vendor, tt.vendor)
			}
			if !reflect.DeepEqual(got.Metrics, tt.want) {
				t.Errorf("Metrics =\n%+v\nwant\n%+v", got.Metrics, tt.want)
			}
			if got.RetryAfter != tt.retry {
				t.Errorf("RetryAfter = %+v, want %+v", got.RetryAfter, tt.retry)
			}
			if fields := problemFields(t, got); !reflect.DeepEqual(fields, tt.problems) {
				t.Errorf("Problems = %v (fields %q), want fields %q", got.Problems, fields, tt.problems)
			}
		})
	}
}

func TestRemainingFloor(t *testing.T) {
	tests := []struct {
		m        MetricSignals
		want     int64
		wantKnow bool
	}{
		{MetricSignals{Remaining: count(29000, ""), Granularity: 1000}, 28500, true},
		{MetricSignals{Remaining: count(0, ""), Granularity: 1000}, 0, true},
		{MetricSignals{Remaining: count(300, ""), Granularity: 1000}, 0, true},
		{MetricSignals{Remaining: count(59, ""), Granularity: 1}, 59, true},
		{MetricSignals{Granularity: 1000}, 0, false},
	}
	for _, tt := range tests {
		got, ok := tt.m.RemainingFloor()
		if got != tt.want || ok != tt.wantKnow {
			t.Errorf("%+v.RemainingFloor() = %d, %v; want %d, %v", tt.m, got, ok, tt.want, tt.wantKnow)
		}
	}
}

func TestParseHeadersAnthropicUnified(t *testing.T) {
	h := header(
		"anthropic-ratelimit-unified-status", "allowed",
		"anthropic-ratelimit-unified-reset", unix(3*time.Hour),
		"anthropic-ratelimit-unified-representative-claim", "five_hour",
		"anthropic-ratelimit-unified-fallback-percentage", "0.5",
		"anthropic-ratelimit-unified-5h-status", "allowed",
		"anthropic-ratelimit-unified-5h-reset", unix(3*time.Hour),
		"anthropic-ratelimit-unified-5h-utilization", "0.24",
		"anthropic-ratelimit-unified-7d-status", "rejected",
		"anthropic-ratelimit-unified-7d-reset", unix(48*time.Hour),
		"anthropic-ratelimit-unified-7d-utilization", "24",
		"anthropic-ratelimit-unified-7d-surpassed-threshold", "0.9",
		"anthropic-ratelimit-unified-overage-status", "Not Allowed!",
	)
	got := ParseHeaders(Anthropic, h, testNow)
	want := UnifiedSignals{
		Status:              "allowed",
		Reset:               instant(3*time.Hour, "anthropic-ratelimit-unified-reset"),
		RepresentativeClaim: "five_hour",
		FallbackPercentage:  Fraction{0.5, true, "anthropic-ratelimit-unified-fallback-percentage"},
		Windows: map[string]UnifiedWindow{
			"5h":      {"allowed", instant(3*time.Hour, "anthropic-ratelimit-unified-5h-reset"), Fraction{0.24, true, "anthropic-ratelimit-unified-5h-utilization"}},
			"7d":      {Status: "rejected", Reset: instant(48*time.Hour, "anthropic-ratelimit-unified-7d-reset")},
			"overage": {},
		},
	}
	if !reflect.DeepEqual(got.Unified, want) {
		t.Errorf("Unified =\n%+v\nwant\n%+v", got.Unified, want)
	}
	if !got.Unified.Rejected() {
		t.Error("Rejected() = false with a rejected 7d window")
	}
	if fields, want := problemFields(t, got), []string{"anthropic-ratelimit-unified-7d-utilization", "anthropic-ratelimit-unified-overage-status"}; !reflect.DeepEqual(fields, want) {
		t.Errorf("problems %q, want %q", fields, want)
	}
	if got.Metrics != nil {
		t.Errorf("Metrics = %+v, want none: the unified headers are not per-metric", got.Metrics)
	}
}

func TestParseHeadersUnifiedWindowCap(t *testing.T) {
	h := make(http.Header)
	for i := range maxUnifiedWindows + 5 {
		h.Set("anthropic-ratelimit-unified-w"+strings.Repeat("x", i)+"-status", "allowed")
	}
	got := ParseHeaders(Anthropic, h, testNow)
	if len(got.Unified.Windows) != maxUnifiedWindows || len(got.Problems) != 5 {
		t.Errorf("%d windows, %d problems; want %d and 5", len(got.Unified.Windows), len(got.Problems), maxUnifiedWindows)
	}
}

func TestSignalsMetricAbsent(t *testing.T) {
	var s Signals
	if m := s.Metric(Tokens); m.Known() {
		t.Errorf("zero Signals knows %+v", m)
	}
}
