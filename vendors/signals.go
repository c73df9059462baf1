package vendors

import "time"

// Count is a whole-number value read from a header, such as a limit or a
// remaining balance. The zero value is unknown.
type Count struct {
	// Value is the number, in the metric's unit (requests, tokens or
	// requests in flight). Meaningful only when Known.
	Value int64
	// Known is false when the header was absent, unusable, or a sentinel
	// that means "no value" (Azure's -1, a limit of 0). An unknown value is
	// never zero: callers must not read Value then.
	Known bool
	// Header names the header the value came from, in lower case; empty
	// when no header was present.
	Header string
}

// Instant is an absolute time read from a header. The zero value is unknown.
type Instant struct {
	// At is the instant; when Known it is after the now the parser was
	// given and at most MaxHorizon after it.
	At time.Time
	// Known is false when the header was absent, zero, negative, in the
	// past, absurd or malformed.
	Known bool
	// Header names the header the value came from, in lower case; empty
	// when no header was present.
	Header string
}

// Fraction is a 0–1 share read from a header, such as Anthropic's unified
// utilisation. The zero value is unknown.
type Fraction struct {
	// Value is in [0, 1] when Known: 0.24 means 24 % used.
	Value float64
	// Known is false when the header was absent or not a number in [0, 1].
	Known bool
	// Header names the header the value came from, in lower case.
	Header string
}

// RetryDelay is how long a vendor asked the caller to wait. The zero value
// is unknown.
type RetryDelay struct {
	// Delay is positive and at most MaxHorizon when Known.
	Delay time.Duration
	// Known is false when no source gave a usable delay.
	Known bool
	// Source names where the delay came from: "retry-after-ms",
	// "retry-after", or for Classify "body" (a Gemini retryDelay or a
	// "try again in 644ms" message).
	Source string
}

// MetricSignals is what a vendor's headers said about one metric. The zero
// value knows nothing.
type MetricSignals struct {
	// Limit is the vendor's limit for the metric in its window. Azure can
	// lower it temporarily, so it may change between responses.
	Limit Count
	// Remaining is what is left before the vendor refuses, as of the
	// response. It is never negative when Known; it can be coarse, see
	// Granularity.
	Remaining Count
	// Reset is when the vendor says the metric is back to its full limit
	// (Anthropic: "fully replenished"; OpenAI: "resets to its initial
	// state").
	Reset Instant
	// Granularity is the step Remaining is rounded to: 1 for an exact
	// value, 1000 for Anthropic's token metrics, which are rounded to the
	// nearest thousand. 0 when Remaining is unknown.
	Granularity int64
}

// RemainingFloor returns the least remaining balance consistent with the
// header: Remaining minus half the Granularity, never below zero. It is the
// value a conservative caller syncs its bucket to. The bool is false when
// Remaining is unknown.
func (m MetricSignals) RemainingFloor() (int64, bool) {
	if !m.Remaining.Known {
		return 0, false
	}
	low := m.Remaining.Value - m.Granularity/2
	if low < 0 {
		low = 0
	}
	return low, true
}

// Known reports whether any of the metric's limit, remaining or reset is
// known.
func (m MetricSignals) Known() bool {
	return m.Limit.Known || m.Remaining.Known || m.Reset.Known
}

// UnifiedWindow is one window of Anthropic's unified limits (subscription
// traffic), e.g. "5h" or "7d".
type UnifiedWindow struct {
	// Status is the vendor's word for the window, e.g. "allowed",
	// "allowed_warning" or "rejected"; empty when absent.
	Status string
	// Reset is when the window resets (sent as epoch seconds).
	Reset Instant
	// Utilization is the share of the window used, 0–1.
	Utilization Fraction
}

// UnifiedSignals is what Anthropic's anthropic-ratelimit-unified-* headers
// said. They are sent on subscription (OAuth) traffic instead of the
// standard anthropic-ratelimit-* headers. The zero value knows nothing.
type UnifiedSignals struct {
	// Status is the overall status, e.g. "allowed" or "rejected"; empty
	// when absent.
	Status string
	// Reset is the overall reset (anthropic-ratelimit-unified-reset).
	Reset Instant
	// RepresentativeClaim names the window that decided Status, e.g.
	// "five_hour"; empty when absent.
	RepresentativeClaim string
	// FallbackPercentage is the -fallback-percentage header, 0–1.
	FallbackPercentage Fraction
	// Windows holds each window seen, keyed by its name in the header
	// ("5h" for anthropic-ratelimit-unified-5h-*). Nil when none.
	Windows map[string]UnifiedWindow
}

// Rejected reports whether the overall status or any window's status is
// "rejected": the vendor refuses until that window's reset.
func (u UnifiedSignals) Rejected() bool {
	if u.Status == "rejected" {
		return true
	}
	for _, w := range u.Windows {
		if w.Status == "rejected" {
			return true
		}
	}
	return false
}

// Signals is what one response's headers said about a vendor's limits. A
// Signals is a plain value, safe to copy; its maps are not shared with the
// header it was read from. The zero value knows nothing.
type Signals struct {
	// Vendor is the vendor whose header names and formats were used.
	Vendor Vendor
	// Metrics holds each metric for which some header was present, even
	// if every value turned out unknown. Nil when none.
	Metrics map[Metric]MetricSignals
	// RetryAfter is the delay from retry-after-ms, else retry-after.
	RetryAfter RetryDelay
	// Unified holds Anthropic's unified (subscription) limits.
	Unified UnifiedSignals
	// Problems lists the values that were present but unusable, each a
	// *ValueError naming the header (or, from Classify, the body field)
	// and the value. A well-formed reset that passed less than
	// MaxHorizon ago is unknown but not listed. Nil when none.
	Problems []error
}

// Metric returns what the headers said about m; the zero MetricSignals
// (everything unknown) when they said nothing.
func (s Signals) Metric(m Metric) MetricSignals {
	return s.Metrics[m]
}
