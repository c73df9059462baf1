package vendors

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// fuzzVendors are the vendors the fuzz targets pick from by index; the last
// is not a known vendor.
var fuzzVendors = []Vendor{OpenAI, Anthropic, Azure, Gemini, ElevenLabs, Groq, OpenRouter, "acme"}

// fuzzNow maps any int64 to an instant between 1970 and about 2286.
func fuzzNow(sec int64) time.Time {
	if sec < 0 {
		sec = -(sec + 1)
	}
	return time.Unix(sec%10_000_000_000, 0).UTC()
}

// fuzzHeader reads "name: value" lines into a header.
func fuzzHeader(raw string) http.Header {
	h := make(http.Header)
	for line := range strings.SplitSeq(raw, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			h.Add(k, v)
		}
	}
	return h
}

// checkInstantSane fails when a known instant is not in (now, now+MaxHorizon].
func checkInstantSane(t *testing.T, what string, in Instant, now time.Time) {
	t.Helper()
	if in.Known && (!in.At.After(now) || in.At.Sub(now) > MaxHorizon) {
		t.Fatalf("%s = %v, not in (now, now+MaxHorizon] with now %v", what, in.At, now)
	}
	if !in.Known && !in.At.IsZero() {
		t.Fatalf("%s unknown but carries %v", what, in.At)
	}
}

func checkSignalsSane(t *testing.T, s Signals, now time.Time) {
	t.Helper()
	for m, ms := range s.Metrics {
		if ms.Limit.Known && ms.Limit.Value <= 0 {
			t.Fatalf("%s limit %d known but not positive", m, ms.Limit.Value)
		}
		if ms.Remaining.Known && ms.Remaining.Value < 0 {
			t.Fatalf("%s remaining %d known but negative", m, ms.Remaining.Value)
		}
		if low, ok := ms.RemainingFloor(); ok && (low < 0 || low > ms.Remaining.Value) {
			t.Fatalf("%s floor %d outside [0, %d]", m, low, ms.Remaining.Value)
		}
		checkInstantSane(t, string(m)+" reset", ms.Reset, now)
	}
	if r := s.RetryAfter; r.Known && (r.Delay <= 0 || r.Delay > MaxHorizon) {
		t.Fatalf("retry-after %v known but out of (0, MaxHorizon]", r.Delay)
	}
	u := s.Unified
	checkInstantSane(t, "unified reset", u.Reset, now)
	for name, w := range u.Windows {
		checkInstantSane(t, "unified "+name+" reset", w.Reset, now)
		if f := w.Utilization; f.Known && (f.Value < 0 || f.Value > 1) {
			t.Fatalf("unified %s utilisation %v out of [0, 1]", name, f.Value)
		}
	}
	if f := u.FallbackPercentage; f.Known && (f.Value < 0 || f.Value > 1) {
		t.Fatalf("fallback percentage %v out of [0, 1]", f.Value)
	}
	if len(u.Windows) > maxUnifiedWindows {
		t.Fatalf("%d unified windows, more than %d", len(u.Windows), maxUnifiedWindows)
	}
	for _, p := range s.Problems {
		if _, ok := p.(*ValueError); !ok {
			t.Fatalf("problem %T is not a *ValueError", p)
		}
	}
}

// FuzzParseReset checks that ParseReset never panics and that a reset it
// accepts lies in (now, now+MaxHorizon].
func FuzzParseReset(f *testing.F) {
	now := testNow.Unix()
	for _, seed := range []struct {
		format uint8
		value  string
	}{
		{1, "6m0s"}, {1, "23h47m36.648s"}, {1, "0s"}, {1, "0"}, {1, "-1s"}, {1, "7.66s"},
		{2, "2026-11-23T14:00:05Z"}, {2, "2026-11-23T15:00:05.5+01:00"},
		{3, "12"}, {3, "-1"}, {3, "0"}, {3, "1.5"}, {3, "NaN"},
		{4, "1795442405"}, {5, "1795442405000"}, {5, "6m0s"},
		{0, "1795442405000"}, {0, "Mon, 23 Nov 2026 14:00:30 GMT"}, {0, "50000000"}, {9, "1s"},
	} {
		f.Add(seed.format, seed.value, now)
	}
	f.Fuzz(func(t *testing.T, format uint8, value string, nowSec int64) {
		now := fuzzNow(nowSec)
		if d, err := ParseRetryAfter(value, now); err == nil && (d <= 0 || d > MaxHorizon) {
			t.Fatalf("ParseRetryAfter(%q) = %v, out of (0, MaxHorizon]", value, d)
		}
		if d, err := ParseRetryAfterMs(value); err == nil && (d <= 0 || d > MaxHorizon) {
			t.Fatalf("ParseRetryAfterMs(%q) = %v, out of (0, MaxHorizon]", value, d)
		}
		at, err := ParseReset(ResetFormat(format%8), value, now)
		if err != nil {
			if !at.IsZero() {
				t.Fatalf("ParseReset(%q) = %v and error %v", value, at, err)
			}
			return
		}
		checkInstantSane(t, "reset", Instant{At: at, Known: true}, now)
	})
}

// FuzzParseHeaders checks that ParseHeaders never panics and that every known
// value is sane: limits positive, remaining not negative, resets after now
// and within MaxHorizon, fractions in [0, 1].
func FuzzParseHeaders(f *testing.F) {
	now := testNow.Unix()
	corpus := []string{
		"x-ratelimit-limit-requests: 60\nx-ratelimit-remaining-requests: 59\nx-ratelimit-reset-requests: 1s\nx-ratelimit-reset-tokens: 6m0s",
		"x-ratelimit-limit-tokens: -1\nx-ratelimit-remaining-tokens: -1\nx-ratelimit-reset-tokens: 0",
		"x-ratelimit-remaining-project-tokens: 0\nx-ratelimit-reset-project-tokens: 45s\nx-ratelimit-remaining-tokens_usage_based: 5",
		"anthropic-ratelimit-input-tokens-remaining: 29000\nanthropic-ratelimit-input-tokens-reset: 2026-11-23T14:00:05Z",
		"anthropic-ratelimit-unified-5h-utilization: 0.24\nanthropic-ratelimit-unified-5h-reset: 1795442405\nanthropic-ratelimit-unified-status: allowed",
		"x-ratelimit-limit: 50\nx-ratelimit-remaining: 49\nx-ratelimit-reset: 1795442405000",
		"current-concurrent-requests: 7\nmaximum-concurrent-requests: 5",
		"retry-after-ms: 644\nretry-after: Mon, 23 Nov 2026 14:00:30 GMT",
	}
	for i, s := range corpus {
		f.Add(uint8(i), s, now)
	}
	f.Fuzz(func(t *testing.T, vendor uint8, raw string, nowSec int64) {
		now := fuzzNow(nowSec)
		v := fuzzVendors[int(vendor)%len(fuzzVendors)]
		s := ParseHeaders(v, fuzzHeader(raw), now)
		if s.Vendor != v {
			t.Fatalf("Vendor = %q, want %q", s.Vendor, v)
		}
		checkSignalsSane(t, s, now)
	})
}

// FuzzClassify checks that Classify never panics, that its answers agree
// with each other, and that the signals it carries are sane.
func FuzzClassify(f *testing.F) {
	now := testNow.Unix()
	for i, seed := range []struct {
		status int
		h      string
		body   string
	}{
		{429, "", openAIRateLimit}, {429, "retry-after-ms: 700", openAIQuota}, {429, "", openAITooLarge},
		{413, "", groqTooLarge}, {429, "retry-after: 30", anthropicRateLimit}, {429, "", anthropicSpend},
		{529, "", anthropicOverload}, {429, "", geminiPerMinute}, {429, "", geminiPerDay},
		{429, "", elevenConcurrent}, {401, "", elevenQuota}, {400, "", elevenTooLong},
		{429, "", azureRateLimit}, {429, "", azureCapacity}, {200, "", ""}, {500, "", "<html>"},
		{429, "", "[" + geminiInputTPM + "]"},
	} {
		f.Add(uint8(i), seed.status, seed.h, []byte(seed.body), now)
	}
	f.Fuzz(func(t *testing.T, vendor uint8, status int, raw string, body []byte, nowSec int64) {
		now := fuzzNow(nowSec)
		v := fuzzVendors[int(vendor)%len(fuzzVendors)]
		c := Classify(v, status, fuzzHeader(raw), body, now)
		checkSignalsSane(t, c.Signals, now)
		if r := c.RetryAfter; r.Known && (r.Delay <= 0 || r.Delay > MaxHorizon) {
			t.Fatalf("retry %v known but out of (0, MaxHorizon]", r.Delay)
		}
		if (c.Kind == OK) != (status >= 200 && status < 300) {
			t.Fatalf("kind %v for status %d", c.Kind, status)
		}
		until, ok := c.CooldownUntil()
		if ok != (c.Kind == RateLimited && c.RetryAfter.Known) || ok && !until.After(now) {
			t.Fatalf("CooldownUntil = %v, %v for kind %v, retry %+v", until, ok, c.Kind, c.RetryAfter)
		}
		if (c.Err() == nil) != (c.Kind == OK) {
			t.Fatalf("Err() = %v for kind %v", c.Err(), c.Kind)
		}
		for _, n := range []Count{c.Limit, c.Requested} {
			if n.Known && n.Value < 0 {
				t.Fatalf("negative body count %+v", n)
			}
		}
	})
}
