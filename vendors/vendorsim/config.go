package vendorsim

import (
	"errors"
	"fmt"
	"time"
)

// Vendor names the vendor a Sim behaves like.
type Vendor string

// The vendors a Sim can simulate.
const (
	// OpenAI serves the OpenAI API (Chat Completions, Responses,
	// Embeddings) with OpenAI's limits: continuously refilled buckets.
	OpenAI Vendor = "openai"
	// Anthropic serves the Anthropic Messages API with Anthropic's
	// limits: RPM, ITPM and OTPM buckets.
	Anthropic Vendor = "anthropic"
	// Azure serves the OpenAI API (also under /openai/deployments/NAME/)
	// with Azure OpenAI's limits: a token count reset every calendar
	// minute and a request count reset every calendar second.
	Azure Vendor = "azure"
)

// Limits are the limits a Sim enforces, per minute unless named per day.
// Zero means no limit of that kind (and no headers for it). Which fields
// apply depends on the vendor: OpenAI uses RPM, TPM, RPD and TPD; Azure
// uses RPM and TPM; Anthropic uses RPM, ITPM and OTPM.
type Limits struct {
	RPM  int64 // requests per minute
	TPM  int64 // tokens per minute (OpenAI, Azure)
	RPD  int64 // requests per day (OpenAI)
	TPD  int64 // tokens per day (OpenAI)
	ITPM int64 // uncached input tokens per minute (Anthropic)
	OTPM int64 // output tokens per minute (Anthropic)
}

// Scale lowers (or raises) every limit by Factor during [At, At+For),
// measured from the Sim's start, as a shared pool does when it is busy.
type Scale struct {
	At     time.Duration // offset from the start, ≥ 0
	For    time.Duration // length, > 0
	Factor float64       // in (0, 100]; each limit becomes max(1, floor(limit × Factor))
}

// Reading is how a Sim counts an OpenAI or Azure call's tokens once its
// response completes: neither vendor says whether its admission charge is
// corrected to the usage, so the Sim plays either reading.
type Reading uint8

// The readings.
const (
	// VendorReading is the zero value: OpenAI adjusts to usage, Azure
	// keeps the admission charge (as Azure documents a running count of
	// the admission charges).
	VendorReading Reading = iota
	// AdjustedToUsage settles TPM (and TPD) to prompt + output tokens when
	// the response completes, refunding what the admission charged in
	// excess or charging what the call used beyond it.
	AdjustedToUsage
	// AdmissionKept keeps the admission charge: max(max_tokens, prompt
	// tokens) on OpenAI, prompt + max_tokens × best_of on Azure, never
	// refunded nor raised, whatever the call used.
	AdmissionKept
)

// String returns the reading's name: "vendor", "adjusted_to_usage" or
// "admission_kept".
func (r Reading) String() string {
	switch r {
	case VendorReading:
		return "vendor"
	case AdjustedToUsage:
		return "adjusted_to_usage"
	case AdmissionKept:
		return "admission_kept"
	}
	return fmt.Sprintf("Reading(%d)", uint8(r))
}

// Clock tells a Sim the time. It must be safe for concurrent use.
type Clock interface {
	Now() time.Time
}

// Config configures a Sim. Only Vendor is required; the zero value of
// every other field is documented on it.
type Config struct {
	// Vendor is the vendor to simulate.
	Vendor Vendor
	// Limits are the limits to enforce; zero fields are not enforced.
	Limits Limits
	// Organization names the organization in error messages; "" means
	// "org-sim".
	Organization string
	// ArrivalJitter is the time a request takes, after the Sim receives it,
	// to reach its limits, in seconds, drawn per request: the network and
	// proxies between a caller and the vendor, whose variation makes
	// requests admitted a fixed interval apart reach the vendor's counters
	// closer together. The zero value is none.
	ArrivalJitter Dist
	// TimeToFirstToken is the latency before the first output token, in
	// seconds; the zero value is no latency.
	TimeToFirstToken Dist
	// PerOutputToken is the time each further output token takes, in
	// seconds; the zero value is no latency.
	PerOutputToken Dist
	// OutputTokens is the number of output tokens a response has, drawn
	// per request and bounded by the request's max tokens (or
	// DefaultMaxTokens). The zero value (Fixed(0)) means 100 tokens.
	OutputTokens Dist
	// DefaultMaxTokens bounds the output of a request that sets no max
	// tokens; 0 means 4096.
	DefaultMaxTokens int64
	// StreamChunkTokens is the number of output tokens per streamed delta;
	// 0 means 1.
	StreamChunkTokens int64
	// ErrorRate is the probability, in [0, 1], that a request fails with
	// the vendor's overloaded error (OpenAI 503, Anthropic 529) before it
	// reaches the limits; such a request counts against nothing.
	ErrorRate float64
	// QuotaExhausted starts the Sim with its quota exhausted: every request
	// gets the vendor's quota error (see Sim.SetQuotaExhausted).
	QuotaExhausted bool
	// Schedule lists limit reductions, relative to the start.
	Schedule []Scale
	// Rules are the readings of what the vendor does not publish that the
	// Sim plays: how limits are counted over their period, the interval
	// requests are limited over, what the limit headers report, and the
	// retry-after of a 429. The zero value is the Sim's default model.
	Rules Rules
	// SeriesInterval is the spacing of the points in Stats.Series; 0
	// records no series.
	SeriesInterval time.Duration
	// Seed initialises the random draws (latency, output length, errors); the same
	// value and the same sequence of requests give the same draws.
	Seed uint64
	// Clock tells the time; nil means the wall clock. Latency is waited
	// out with real timers (fake time under testing/synctest), whatever
	// the Clock.
	Clock Clock
}

// ErrConfig is matched by every configuration error (errors.Is).
var ErrConfig = errors.New("vendorsim: invalid configuration")

// FieldError is a configuration field with an invalid value.
type FieldError struct {
	Field  string // e.g. "Limits.RPM"
	Value  any    // the value given
	Reason string // why it is invalid
}

// Error implements error.
func (e *FieldError) Error() string {
	return fmt.Sprintf("vendorsim: %s: %v: %s", e.Field, e.Value, e.Reason)
}

// Is reports whether target is ErrConfig.
func (e *FieldError) Is(target error) bool { return target == ErrConfig }

const maxLimit = 1_000_000_000_000 // 10^12 per minute or per day

func (c Config) validate() error {
	switch c.Vendor {
	case OpenAI, Anthropic, Azure:
	default:
		return &FieldError{"Vendor", c.Vendor, "must be openai, anthropic or azure"}
	}
	l := c.Limits
	type lim struct {
		name string
		v    int64
		ok   bool
	}
	oa, an := c.Vendor != Anthropic, c.Vendor == Anthropic
	for _, f := range []lim{{"RPM", l.RPM, true}, {"TPM", l.TPM, oa}, {"RPD", l.RPD, c.Vendor == OpenAI},
		{"TPD", l.TPD, c.Vendor == OpenAI}, {"ITPM", l.ITPM, an}, {"OTPM", l.OTPM, an}} {
		switch {
		case f.v < 0 || f.v > maxLimit:
			return &FieldError{"Limits." + f.name, f.v, "must be between 0 (none) and 10^12"}
		case f.v != 0 && !f.ok:
			return &FieldError{"Limits." + f.name, f.v, fmt.Sprintf("does not apply to vendor %s", c.Vendor)}
		}
	}
	for _, d := range []struct {
		name string
		d    Dist
	}{{"ArrivalJitter", c.ArrivalJitter}, {"TimeToFirstToken", c.TimeToFirstToken}, {"PerOutputToken", c.PerOutputToken}, {"OutputTokens", c.OutputTokens}} {
		if err := d.d.validate(d.name); err != nil {
			return err
		}
	}
	if c.Rules.Reading != VendorReading && c.Vendor == Anthropic {
		return &FieldError{"Rules.Reading", c.Rules.Reading, "does not apply to vendor anthropic, which adjusts input to usage and counts output as produced"}
	}
	if c.DefaultMaxTokens < 0 || c.DefaultMaxTokens > 10_000_000 {
		return &FieldError{"DefaultMaxTokens", c.DefaultMaxTokens, "must be between 0 (default) and 10^7"}
	}
	if c.StreamChunkTokens < 0 || c.StreamChunkTokens > 1_000_000 {
		return &FieldError{"StreamChunkTokens", c.StreamChunkTokens, "must be between 0 (default) and 10^6"}
	}
	if !(c.ErrorRate >= 0 && c.ErrorRate <= 1) {
		return &FieldError{"ErrorRate", c.ErrorRate, "must be between 0 and 1"}
	}
	if c.SeriesInterval < 0 {
		return &FieldError{"SeriesInterval", c.SeriesInterval, "must not be negative"}
	}
	if err := c.Rules.validate(); err != nil {
		return err
	}
	for i, s := range c.Schedule {
		if err := s.validate(fmt.Sprintf("Schedule[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

func (s Scale) validate(field string) error {
	switch {
	case s.At < 0:
		return &FieldError{field + ".At", s.At, "must not be negative"}
	case s.For <= 0:
		return &FieldError{field + ".For", s.For, "must be positive"}
	case !(s.Factor > 0 && s.Factor <= 100):
		return &FieldError{field + ".Factor", s.Factor, "must be in (0, 100]"}
	}
	return nil
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
