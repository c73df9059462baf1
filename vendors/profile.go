package vendors

import (
	"fmt"
	"strings"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// DefaultHeadroom is the headroom a profile uses unless WithHeadroom says
// otherwise: 2 % below the vendor's rule.
const DefaultHeadroom = 0.02

// MaxHeadroom is the largest headroom WithHeadroom accepts (50 %).
const MaxHeadroom = 0.5

// Profile is a vendor's limits for one scope turned into buckets, with the
// vendor's cost model. Build one with a vendor's constructor
// (OpenAIProfile, AnthropicProfile, AzureProfile, GeminiProfile,
// GroqProfile, ElevenLabsProfile); a Profile is a plain value, safe to
// share between goroutines once built.
type Profile struct {
	// Vendor is the vendor, and the first part of every dimension name.
	Vendor Vendor
	// Scope is the model, deployment or model family the limits apply to;
	// empty when they apply to the whole account. Dimension names are
	// "vendor#scope#suffix", or "vendor#suffix" when Scope is empty.
	Scope string
	// Headroom is the fraction (0 to 0.5) by which every time-based
	// dimension is kept below the vendor's rule.
	Headroom float64
	// Dimensions lists the profile's dimensions in a fixed order: requests,
	// then tokens, then daily limits, then concurrency.
	Dimensions []Dimension
	// Cost is what the vendor counts at admission and settles later.
	Cost CostModel
}

// Dimension is one limit of a profile: a bucket and the vendor rule it
// stays under.
type Dimension struct {
	// Name is the dimension's full name, e.g. "openai#gpt-4o#tpm".
	Name string
	// Metric is what the dimension counts.
	Metric Metric
	// Config is the bucket. Its capacity plus what it refills in any
	// window never exceeds what Rule admits in that window.
	Config bucket.Config
	// Limit is the vendor's published number, e.g. 500 for 500 RPM.
	Limit int64
	// Window is the published number's window: a minute or a day; zero for
	// a concurrency limit.
	Window time.Duration
	// Rule is how the vendor enforces Limit, as Sluice reads it.
	Rule Rule
}

// RuleKind is the shape of a vendor's enforcement.
type RuleKind uint8

// The rule kinds.
const (
	// ContinuousBucket is a token bucket refilled continuously at Limit per
	// Window, holding at most Rule.BurstMilli/1000 units; it admits at most
	// BurstMilli/1000 + Limit·w/Window in any window of length w.
	ContinuousBucket RuleKind = 1
	// FixedWindow is a count reset at each calendar window (a minute, a
	// second, a day): at most Rule.Limit in each. Across a boundary it
	// admits up to twice that in a short window.
	FixedWindow RuleKind = 2
	// Concurrency limits requests in flight to Rule.Limit; it never refills.
	Concurrency RuleKind = 3
)

// String returns the kind's name as the documentation writes it.
func (k RuleKind) String() string {
	switch k {
	case ContinuousBucket:
		return "continuous bucket"
	case FixedWindow:
		return "fixed window"
	case Concurrency:
		return "concurrency"
	}
	return fmt.Sprintf("RuleKind(%d)", uint8(k))
}

// Rule is how a vendor enforces one limit.
type Rule struct {
	// Kind is the enforcement's shape.
	Kind RuleKind
	// Limit is what the vendor admits per Window (for a ContinuousBucket,
	// its refill per Window; for a FixedWindow, per calendar Window; for
	// Concurrency, the slots). It may differ from the published number:
	// Azure's RPM is enforced as ceil(RPM/60) per calendar second.
	Limit int64
	// Window is the refill or calendar window; zero for Concurrency.
	Window time.Duration
	// BurstMilli is a ContinuousBucket's capacity in thousandths of a unit,
	// rounded down (500 RPM: 8333, one second's worth); zero otherwise.
	BurstMilli int64
}

// Prefix returns the part of every dimension name before the metric
// suffix: "vendor" or "vendor#scope".
func (p Profile) Prefix() string { return prefix(p.Vendor, p.Scope) }

func prefix(v Vendor, scope string) string {
	if scope == "" {
		return string(v)
	}
	return string(v) + "#" + scope
}

// Buckets returns the profile's buckets, in the order of Dimensions, ready
// for sluice.Client.PutBucket or a limits file.
func (p Profile) Buckets() []store.Bucket {
	out := make([]store.Bucket, len(p.Dimensions))
	for i, d := range p.Dimensions {
		out[i] = store.Bucket{Name: d.Name, Config: d.Config}
	}
	return out
}

// Dimension returns the name of the dimension that enforces m, and false
// when the profile has none (a header parser's Metric the profile does not
// declare, such as Tokens on an Anthropic profile).
func (p Profile) Dimension(m Metric) (name string, ok bool) {
	for _, d := range p.Dimensions {
		if d.Metric == m {
			return d.Name, true
		}
	}
	return "", false
}

// Suffix returns the dimension-name suffix of a metric, the same key a
// limits file uses: "rpm", "tpm", "input_tpm", "output_tpm", "rpd", "tpd"
// or "concurrent". It returns "" for an unknown metric.
func Suffix(m Metric) string {
	switch m {
	case Requests:
		return "rpm"
	case Tokens:
		return "tpm"
	case InputTokens:
		return "input_tpm"
	case OutputTokens:
		return "output_tpm"
	case RequestsPerDay:
		return "rpd"
	case TokensPerDay:
		return "tpd"
	case Concurrent:
		return "concurrent"
	}
	return ""
}

// MetricOf is the inverse of Suffix: the metric a file key names.
func MetricOf(suffix string) (Metric, bool) {
	for _, m := range []Metric{Requests, Tokens, InputTokens, OutputTokens, RequestsPerDay, TokensPerDay, Concurrent} {
		if Suffix(m) == suffix {
			return m, true
		}
	}
	return "", false
}

// ProfileOption adjusts a profile as it is built.
type ProfileOption func(*options)

type options struct {
	headroom    float64
	headroomSet bool
	margin      time.Duration
	bursts      map[Metric]int64
	order       []Metric // bursts in the order given, for errors
	readings    []readingOpt
}

// WithHeadroom keeps every time-based dimension the fraction f below the
// vendor's rule (0 to 0.5; the default is DefaultHeadroom, 0.02): capacity
// and refill rate are both scaled by 1 − f, so that clock and latency
// differences between Sluice and the vendor never make Sluice the more
// permissive one. Concurrency limits have no clock and are not scaled.
func WithHeadroom(f float64) ProfileOption {
	return func(o *options) { o.headroom, o.headroomSet = f, true }
}

// DefaultRequestMargin is the arrival jitter a profile's requests
// dimensions absorb unless WithRequestMargin says otherwise.
const DefaultRequestMargin = 50 * time.Millisecond

// MaxRequestMargin is the largest margin WithRequestMargin accepts.
const MaxRequestMargin = 10 * time.Second

// WithRequestMargin makes every per-second or per-minute requests
// dimension absorb a variation of up to d in the time calls take to reach
// the vendor (default DefaultRequestMargin, 0 to MaxRequestMargin; 0
// turns it off). Requests admitted a fixed interval apart reach the vendor
// up to d closer together; a vendor bucket that holds few requests (Anthropic
// and OpenAI at low RPM hold one) then refuses the second. The profile keeps
// the vendor's spare capacity at least d's worth of requests, by lowering
// its own capacity, or, when it holds only one, by spacing requests d
// further apart: at 50 RPM one request every 1.25 s instead of 1.22 s. A
// dimension whose capacity WithBurst sets is left as given.
func WithRequestMargin(d time.Duration) ProfileOption {
	return func(o *options) { o.margin = d }
}

// WithBurst sets the capacity of the dimension enforcing m to n, in the
// metric's units. The profile is refused if n would make the bucket more
// permissive than the vendor's rule: for a continuous vendor bucket n may
// not exceed the vendor's own capacity; for a fixed window the refill is
// lowered so that capacity plus refill stays within the window's limit.
func WithBurst(m Metric, n int64) ProfileOption {
	return func(o *options) {
		if o.bursts == nil {
			o.bursts = map[Metric]int64{}
		}
		if _, dup := o.bursts[m]; !dup {
			o.order = append(o.order, m)
		}
		o.bursts[m] = n
	}
}

// ppm is one million: headroom is kept in parts per million so that every
// scaled capacity and period is exact integer arithmetic.
const ppm = 1_000_000

// builder accumulates a profile's dimensions and the first error.
type builder struct {
	p      Profile
	hp     int64 // headroom in parts per million
	opts   options
	used   map[Metric]bool
	err    error
	nLimit int
}

func newBuilder(v Vendor, scopeField, scope string, cost CostModel, opts []ProfileOption) *builder {
	b := &builder{p: Profile{Vendor: v, Scope: scope, Cost: cost}, used: map[Metric]bool{}}
	b.opts.headroom = DefaultHeadroom
	b.opts.margin = DefaultRequestMargin
	for _, o := range opts {
		if o != nil {
			o(&b.opts)
		}
	}
	h := b.opts.headroom
	if !(h >= 0 && h <= MaxHeadroom) { // also refuses NaN
		return b.fail("headroom", h, "must be between 0 and 0.5 (0 % to 50 %)")
	}
	b.p.Headroom = h
	b.hp = int64(h*ppm + 0.5)
	if m := b.opts.margin; m < 0 || m > MaxRequestMargin {
		return b.fail("request margin", m, "must be between 0 and 10s")
	}
	if scope != "" && (strings.Contains(scope, "#") || strings.TrimSpace(scope) != scope) {
		return b.fail(scopeField, scope, "must be a name without '#' or surrounding spaces")
	}
	b.applyReadings()
	return b
}

func (b *builder) fail(field string, v any, why string) *builder {
	if b.err == nil {
		b.err = &bucket.FieldError{Field: field, Value: v, Reason: why}
	}
	return b
}

// limit checks a published number: 0 means not enforced, negative or above
// 10^12 is an error. It reports whether the dimension should be added.
func (b *builder) limit(m Metric, n int64) bool {
	if b.err != nil {
		return false
	}
	if n < 0 || n > bucket.MaxCapacity {
		b.fail(Suffix(m), n, "must be between 1 and 10^12 (0 or absent: not enforced)")
		return false
	}
	if n > 0 {
		b.nLimit++
	}
	return n > 0
}

// burst returns the WithBurst capacity for m, if any.
func (b *builder) burst(m Metric) (int64, bool) {
	n, ok := b.opts.bursts[m]
	b.used[m] = true
	return n, ok
}

// add appends a dimension whose name is derived from the profile.
func (b *builder) add(m Metric, c bucket.Config, limit int64, window time.Duration, r Rule) {
	if b.err != nil {
		return
	}
	name := b.p.Prefix() + "#" + Suffix(m)
	if err := contract.Name(name); err != nil {
		b.err = err
		return
	}
	if err := c.Validate(); err != nil {
		b.err = fmt.Errorf("%s: %w", name, err)
		return
	}
	b.p.Dimensions = append(b.p.Dimensions, Dimension{Name: name, Metric: m, Config: c, Limit: limit, Window: window, Rule: r})
}

// done checks what every profile needs and returns it.
func (b *builder) done(fields string) (Profile, error) {
	if b.err == nil && b.nLimit == 0 {
		b.fail(fields, 0, "no limit given; set at least one")
	}
	if b.err == nil {
		for _, m := range b.opts.order {
			if !b.used[m] {
				b.fail("burst["+Suffix(m)+"]", b.opts.bursts[m], fmt.Sprintf("the %s profile has no %s dimension", b.p.Vendor, metricName(m)))
				break
			}
		}
	}
	if b.err != nil {
		return Profile{}, fmt.Errorf("vendors: %s profile: %w", b.p.Vendor, b.err)
	}
	return b.p, nil
}

func metricName(m Metric) string {
	if s := Suffix(m); s != "" {
		return s
	}
	return fmt.Sprintf("%q", string(m))
}
