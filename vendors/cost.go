package vendors

import (
	"fmt"

	"github.com/ontopix/sluice/bucket"
)

// Call is what is known about a request before it is sent: the quantities
// a vendor's admission charge is computed from. Every field is a count,
// zero when unknown; negative values are refused.
type Call struct {
	// InputTokens is the caller's estimate of the input (prompt) tokens.
	// For Anthropic it is the uncached input: tokens read from the prompt
	// cache do not count.
	InputTokens int64
	// Characters is the prompt's length in characters. OpenAI estimates a
	// prompt as ceil(characters/4) tokens; a profile uses the larger of
	// that and InputTokens.
	Characters int64
	// MaxOutputTokens is the request's output cap: max_tokens,
	// max_completion_tokens or max_output_tokens. Zero when the request
	// sets none.
	MaxOutputTokens int64
	// OutputEstimate is the output the caller expects. Only Anthropic's
	// OTPM admission uses it (see AdmitOutputEstimate).
	OutputEstimate int64
	// N is the number of completions asked for (best_of on Azure, n on
	// OpenAI and Groq); zero means 1.
	N int64
}

// Usage is what the vendor's response reports, in the vendor's own terms.
type Usage struct {
	// Input is the input tokens as the response counts them: OpenAI's and
	// Groq's prompt_tokens (cached tokens included), Anthropic's
	// input_tokens (cache reads and writes excluded), Gemini's
	// promptTokenCount.
	Input int64
	// Output is the output tokens (completion_tokens, output_tokens,
	// candidatesTokenCount).
	Output int64
	// CacheCreation is Anthropic's cache_creation_input_tokens.
	CacheCreation int64
	// CacheRead is the input served from the prompt cache: Anthropic's
	// cache_read_input_tokens, OpenAI's and Groq's
	// prompt_tokens_details.cached_tokens (part of Input).
	CacheRead int64
}

// Charge is an amount on one metric and, from a Profile, the dimension
// that enforces it.
type Charge struct {
	// Metric is what is counted.
	Metric Metric
	// Dimension is the dimension's name; empty from a CostModel alone.
	Dimension string
	// Amount is in the metric's units: requests, tokens or slots.
	Amount int64
}

// AdmitRule is what a vendor counts when it admits a request.
type AdmitRule uint8

// The admission rules.
const (
	// AdmitOne counts one (a request, or a concurrency slot).
	AdmitOne AdmitRule = 1
	// AdmitMaxOutputOrInput counts max(MaxOutputTokens × N, input
	// estimate): OpenAI's reading, where the estimate is the larger of
	// InputTokens and ceil(Characters/4).
	AdmitMaxOutputOrInput AdmitRule = 2
	// AdmitInput counts the input estimate (Anthropic ITPM, Gemini TPM,
	// Groq ITPM).
	AdmitInput AdmitRule = 3
	// AdmitInputPlusMaxOutput counts input estimate + MaxOutputTokens × N
	// (Azure: prompt + max_tokens × best_of).
	AdmitInputPlusMaxOutput AdmitRule = 4
	// AdmitOutputEstimate counts OutputEstimate, at least 1 (Anthropic
	// OTPM). Anthropic counts output as it is produced and requires only a
	// positive balance to admit; max_tokens does not count. Charging
	// max_tokens would hold back tokens that are mostly never produced, so
	// the caller gives its own expectation and the settlement corrects it.
	AdmitOutputEstimate AdmitRule = 5
	// AdmitMaxOutput counts MaxOutputTokens × N (Groq OTPM, read as
	// OpenAI), or the output estimate when no cap is set.
	AdmitMaxOutput AdmitRule = 6
)

// String describes the rule as the documentation's tables write it.
func (r AdmitRule) String() string {
	switch r {
	case AdmitOne:
		return "1"
	case AdmitMaxOutputOrInput:
		return "max(max_tokens × n, input estimate)"
	case AdmitInput:
		return "input estimate"
	case AdmitInputPlusMaxOutput:
		return "input estimate + max_tokens × best_of"
	case AdmitOutputEstimate:
		return "output estimate (not max_tokens)"
	case AdmitMaxOutput:
		return "max_tokens × n"
	}
	return fmt.Sprintf("AdmitRule(%d)", uint8(r))
}

// SettleRule is what a vendor finally counts once the response reports its
// usage.
type SettleRule uint8

// The settlement rules.
const (
	// SettleNever keeps the admission charge: requests count even when
	// they fail, and a concurrency slot is released, not settled.
	SettleNever SettleRule = 1
	// SettleInputOutput settles to Input + Output (OpenAI).
	SettleInputOutput SettleRule = 2
	// SettleUncachedInputOutput settles to Input − CacheRead + Output
	// (Groq: cached tokens do not count).
	SettleUncachedInputOutput SettleRule = 3
	// SettleInputCacheCreation settles to Input + CacheCreation
	// (Anthropic ITPM: cache reads excluded).
	SettleInputCacheCreation SettleRule = 4
	// SettleOutput settles to Output (Anthropic OTPM, Groq OTPM).
	SettleOutput SettleRule = 5
	// SettleInput settles to Input (Gemini TPM).
	SettleInput SettleRule = 6
	// SettleUncachedInput settles to Input − CacheRead (Groq ITPM).
	SettleUncachedInput SettleRule = 7
	// SettleChargeMore settles to max(admitted, Input + Output): it is
	// SettleInputOutput read as AdmissionKept, whatever the MetricCost's
	// Reading. The built-in models use SettleInputOutput with a Reading
	// instead, so that the reading can be changed.
	SettleChargeMore SettleRule = 8
)

// String describes the rule as the documentation's tables write it.
func (r SettleRule) String() string {
	switch r {
	case SettleNever:
		return "not settled"
	case SettleInputOutput:
		return "input + output"
	case SettleUncachedInputOutput:
		return "input − cached + output"
	case SettleInputCacheCreation:
		return "input + cache creation (cache reads excluded)"
	case SettleOutput:
		return "output"
	case SettleInput:
		return "input"
	case SettleUncachedInput:
		return "input − cached"
	case SettleChargeMore:
		return "max(admitted, input + output): never refunded"
	}
	return fmt.Sprintf("SettleRule(%d)", uint8(r))
}

// Reading is how a vendor's count of a call's tokens relates to its
// admission charge once the usage is known. Vendors that publish their
// algorithm say which reading is theirs; for the others it is a reading,
// and the one that cannot over-admit under either is AdmissionKept.
type Reading uint8

// The readings.
const (
	// AdjustedToUsage settles the charge to the usage as the SettleRule
	// computes it, refunding what the admission charged in excess: the
	// vendor corrects its count to what the call used (Anthropic, which
	// says so). It is the zero value.
	AdjustedToUsage Reading = 0
	// AdmissionKept never settles below the admission charge: the
	// settlement may raise the charge to the usage when the call used
	// more, never refund it. It counts at least what a vendor that keeps
	// its admission charge counts, and at least what one that adjusts to
	// usage counts, so Sluice never believes it has tokens the vendor has
	// already counted, under either reading; it costs the allowance that a
	// vendor adjusting to usage would have refunded.
	AdmissionKept Reading = 1
)

// String returns the reading's name as a limits file writes it:
// "adjusted_to_usage" or "admission_kept".
func (r Reading) String() string {
	switch r {
	case AdjustedToUsage:
		return "adjusted_to_usage"
	case AdmissionKept:
		return "admission_kept"
	}
	return fmt.Sprintf("Reading(%d)", uint8(r))
}

// ParseReading returns the reading s names ("adjusted_to_usage" or
// "admission_kept"), and false for any other string.
func ParseReading(s string) (Reading, bool) {
	for _, r := range []Reading{AdjustedToUsage, AdmissionKept} {
		if r.String() == s {
			return r, true
		}
	}
	return 0, false
}

// MetricCost is the cost model of one metric.
type MetricCost struct {
	// Metric is what is counted.
	Metric Metric
	// Admit is what the vendor counts at admission.
	Admit AdmitRule
	// Settle is what it counts once the usage is known.
	Settle SettleRule
	// Reading says whether the settlement may refund below the admission
	// charge (AdjustedToUsage, the zero value) or never does
	// (AdmissionKept). It has no effect on a SettleNever metric.
	Reading Reading
}

// CostModel states, per metric, what a vendor counts at admission and what
// it settles later. It is a plain value; its methods are safe for
// concurrent use.
type CostModel struct {
	// Vendor is the vendor.
	Vendor Vendor
	// Metrics lists the metrics the vendor counts.
	Metrics []MetricCost
}

// Admission returns the charge of c on every metric of the model, in the
// order of Metrics. Every charge is at least 1: a charge of nothing is not
// a request. A negative quantity is a *bucket.FieldError.
func (m CostModel) Admission(c Call) ([]Charge, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	n := max(1, c.N)
	est := max(c.InputTokens, (c.Characters+3)/4)
	out := make([]Charge, 0, len(m.Metrics))
	for _, mc := range m.Metrics {
		var v int64
		switch mc.Admit {
		case AdmitOne:
			v = 1
		case AdmitMaxOutputOrInput:
			v = max(sat(c.MaxOutputTokens, n), est)
		case AdmitInput:
			v = est
		case AdmitInputPlusMaxOutput:
			v = satAdd(est, sat(c.MaxOutputTokens, n))
		case AdmitOutputEstimate:
			v = c.OutputEstimate
		case AdmitMaxOutput:
			v = sat(c.MaxOutputTokens, n)
			if v == 0 {
				v = c.OutputEstimate
			}
		default:
			return nil, &bucket.FieldError{Field: "admit", Value: mc.Admit, Reason: "unknown admission rule"}
		}
		out = append(out, Charge{Metric: mc.Metric, Amount: max(1, v)})
	}
	return out, nil
}

// Settle returns the final charge on every metric that settles (SettleNever
// metrics are left out), given the admission charges and the reported
// usage: the totals to settle a lease's dimensions to. A metric read as
// AdmissionKept settles to no less than its admission charge in admitted.
// A negative usage count is a *bucket.FieldError.
func (m CostModel) Settle(admitted []Charge, u Usage) ([]Charge, error) {
	if err := u.validate(); err != nil {
		return nil, err
	}
	var out []Charge
	for _, mc := range m.Metrics {
		var v int64
		switch mc.Settle {
		case SettleNever:
			continue
		case SettleInputOutput:
			v = satAdd(u.Input, u.Output)
		case SettleUncachedInputOutput:
			v = satAdd(max(0, u.Input-u.CacheRead), u.Output)
		case SettleInputCacheCreation:
			v = satAdd(u.Input, u.CacheCreation)
		case SettleOutput:
			v = u.Output
		case SettleInput:
			v = u.Input
		case SettleUncachedInput:
			v = max(0, u.Input-u.CacheRead)
		case SettleChargeMore:
			v = satAdd(u.Input, u.Output)
		default:
			return nil, &bucket.FieldError{Field: "settle", Value: mc.Settle, Reason: "unknown settlement rule"}
		}
		if mc.Settle == SettleChargeMore || mc.Reading == AdmissionKept {
			for _, a := range admitted {
				if a.Metric == mc.Metric {
					v = max(v, a.Amount)
				}
			}
		}
		out = append(out, Charge{Metric: mc.Metric, Amount: v})
	}
	return out, nil
}

func (c Call) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"input_tokens", c.InputTokens}, {"characters", c.Characters}, {"max_output_tokens", c.MaxOutputTokens}, {"output_estimate", c.OutputEstimate}, {"n", c.N}} {
		if f.v < 0 {
			return &bucket.FieldError{Field: f.name, Value: f.v, Reason: "must not be negative"}
		}
	}
	return nil
}

func (u Usage) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"usage.input", u.Input}, {"usage.output", u.Output}, {"usage.cache_creation", u.CacheCreation}, {"usage.cache_read", u.CacheRead}} {
		if f.v < 0 {
			return &bucket.FieldError{Field: f.name, Value: f.v, Reason: "must not be negative"}
		}
	}
	return nil
}

// sat returns a·b for non-negative operands, saturating at MaxInt64.
func sat(a, b int64) int64 {
	if a != 0 && b > (1<<63-1)/a {
		return 1<<63 - 1
	}
	return a * b
}

// satAdd returns a+b for non-negative operands, saturating at MaxInt64.
func satAdd(a, b int64) int64 {
	if a > 1<<63-1-b {
		return 1<<63 - 1
	}
	return a + b
}
