package vendorsim

import (
	"fmt"
	"strings"
	"time"
)

// Window is how a Sim enforces a per-minute limit over its period. The
// vendors publish their limits per minute but not how they count them, so
// a limiter that is right must be right under each of these readings.
type Window int

const (
	// WindowVendor is the vendor's own reading as the Sim models it by
	// default: a token bucket refilled continuously (OpenAI, Anthropic) or
	// fixed calendar windows (Azure: requests per second, tokens per
	// minute).
	WindowVendor Window = iota
	// WindowTokenBucket refills continuously at limit per minute, holding
	// at most a minute's worth (requests: the request interval's worth).
	WindowTokenBucket
	// WindowFixed counts in calendar windows of the limit's period (the
	// request interval for requests), reset at each boundary: a full
	// window's worth may pass just before a boundary and another just
	// after it.
	WindowFixed
	// WindowSliding counts the units admitted in the last period: a unit
	// frees its share of the limit one period after it was counted.
	WindowSliding
)

var windowNames = map[Window]string{WindowVendor: "vendor", WindowTokenBucket: "bucket", WindowFixed: "fixed", WindowSliding: "sliding"}

// String returns the name ParseRules accepts.
func (w Window) String() string {
	if s, ok := windowNames[w]; ok {
		return s
	}
	return fmt.Sprintf("Window(%d)", int(w))
}

// HeaderRule is what a Sim's limit headers report.
type HeaderRule int

const (
	// HeadersTrue reports the limits in effect.
	HeadersTrue HeaderRule = iota
	// HeadersFlap alternates, every FlapPeriod, between the limits in
	// effect and half of them (remaining capped to match), as a vendor
	// whose pool is shared and whose headers follow it.
	HeadersFlap
	// HeadersAbsurd reports a limit of 10 and at most 10 remaining,
	// whatever is enforced.
	HeadersAbsurd
	// HeadersDouble reports twice the limits in effect, disagreeing with
	// the configuration (remaining as enforced).
	HeadersDouble
)

// FlapPeriod is the half-cycle of HeadersFlap.
const FlapPeriod = 500 * time.Millisecond

var headerNames = map[HeaderRule]string{HeadersTrue: "true", HeadersFlap: "flap", HeadersAbsurd: "absurd", HeadersDouble: "double"}

// String returns the name ParseRules accepts.
func (h HeaderRule) String() string {
	if s, ok := headerNames[h]; ok {
		return s
	}
	return fmt.Sprintf("HeaderRule(%d)", int(h))
}

// AbsurdRetryAfter is the retry-after, in seconds, that Rules.AbsurdRetryAfter
// puts on every rate-limit 429: a day.
const AbsurdRetryAfter = 86400

// Rules are the readings of what a vendor does not publish that a Sim
// plays. The zero value is the Sim's default model of the vendor.
type Rules struct {
	// Window is how per-minute limits are counted. Daily limits (OpenAI's
	// RPD and TPD) keep the vendor's reading.
	Window Window
	// RequestInterval is the interval over which the request limit is
	// enforced: the requests per minute scaled to it, rounded up, at least
	// one (1 s: RPM/60 per second). 0 is the vendor's: 1 s, for every
	// vendor the Sim plays. It must be 0 or between 1 s and 1 min.
	RequestInterval time.Duration
	// Headers is what the limit headers report.
	Headers HeaderRule
	// AbsurdRetryAfter makes every rate-limit 429 carry a retry-after of
	// a day (AbsurdRetryAfter seconds), whatever the real wait.
	AbsurdRetryAfter bool
	// Reading is how OpenAI's or Azure's token limits count a completed
	// call: adjusted to its usage, or the admission charge kept. The zero
	// value is each vendor's as the Sim plays it (see VendorReading);
	// Anthropic publishes its reading, and a Config refuses any other for
	// it.
	Reading Reading
}

// String returns r in the form ParseRules reads; the zero Rules is
// "vendor".
func (r Rules) String() string {
	var parts []string
	if r.Window != WindowVendor {
		parts = append(parts, "window="+r.Window.String())
	}
	if r.RequestInterval != 0 {
		parts = append(parts, "requests="+r.RequestInterval.String())
	}
	if r.Headers != HeadersTrue {
		parts = append(parts, "headers="+r.Headers.String())
	}
	if r.AbsurdRetryAfter {
		parts = append(parts, "retry-after=absurd")
	}
	if r.Reading != VendorReading {
		parts = append(parts, "reading="+r.Reading.String())
	}
	if len(parts) == 0 {
		return "vendor"
	}
	return strings.Join(parts, ",")
}

// ParseRules reads rules written as comma-separated key=value pairs:
// window=vendor|bucket|fixed|sliding, requests=<duration from 1s to 1m>
// (or "vendor"), headers=true|flap|absurd|double,
// retry-after=true|absurd and reading=vendor|adjusted_to_usage|admission_kept.
// "vendor" (or "") alone is the zero Rules.
func ParseRules(s string) (Rules, error) {
	var r Rules
	s = strings.TrimSpace(s)
	if s == "" || s == "vendor" {
		return r, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return Rules{}, &FieldError{"Rules", kv, "must be key=value (window, requests, headers, retry-after, reading)"}
		}
		if err := r.set(k, v); err != nil {
			return Rules{}, err
		}
	}
	return r, r.validate()
}

// set applies one key=value of ParseRules.
func (r *Rules) set(k, v string) error {
	switch k {
	case "window":
		for w, name := range windowNames {
			if v == name {
				r.Window = w
				return nil
			}
		}
		return &FieldError{"Rules.Window", v, "must be vendor, bucket, fixed or sliding"}
	case "requests":
		if v == "vendor" {
			r.RequestInterval = 0
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return &FieldError{"Rules.RequestInterval", v, "must be a duration from 1s to 1m, or vendor"}
		}
		r.RequestInterval = d
		return nil
	case "headers":
		for h, name := range headerNames {
			if v == name {
				r.Headers = h
				return nil
			}
		}
		return &FieldError{"Rules.Headers", v, "must be true, flap, absurd or double"}
	case "retry-after":
		switch v {
		case "true":
			r.AbsurdRetryAfter = false
		case "absurd":
			r.AbsurdRetryAfter = true
		default:
			return &FieldError{"Rules.AbsurdRetryAfter", v, "retry-after must be true or absurd"}
		}
		return nil
	case "reading":
		for _, rd := range []Reading{VendorReading, AdjustedToUsage, AdmissionKept} {
			if v == rd.String() {
				r.Reading = rd
				return nil
			}
		}
		return &FieldError{"Rules.Reading", v, "must be vendor, adjusted_to_usage or admission_kept"}
	}
	return &FieldError{"Rules", k, "unknown key: must be window, requests, headers, retry-after or reading"}
}

// validate checks r's fields.
func (r Rules) validate() error {
	if _, ok := windowNames[r.Window]; !ok {
		return &FieldError{"Rules.Window", r.Window, "must be WindowVendor, WindowTokenBucket, WindowFixed or WindowSliding"}
	}
	if d := r.RequestInterval; d != 0 && (d < time.Second || d > time.Minute) {
		return &FieldError{"Rules.RequestInterval", d, "must be 0 (the vendor's) or between 1s and 1m"}
	}
	if _, ok := headerNames[r.Headers]; !ok {
		return &FieldError{"Rules.Headers", r.Headers, "must be HeadersTrue, HeadersFlap, HeadersAbsurd or HeadersDouble"}
	}
	if r.Reading > AdmissionKept {
		return &FieldError{"Rules.Reading", r.Reading, "must be VendorReading, AdjustedToUsage or AdmissionKept"}
	}
	return nil
}

// headerViews returns vs as r's headers report them at now, elapsed since
// the Sim started.
func (r Rules) headerViews(vs []view, elapsed time.Duration) []view {
	if r.Headers == HeadersTrue {
		return vs
	}
	out := make([]view, len(vs))
	for i, v := range vs {
		switch r.Headers {
		case HeadersFlap:
			if (elapsed/FlapPeriod)%2 == 1 {
				v.limit = max(v.limit/2, 1)
				v.remaining = min(v.remaining, v.limit)
			}
		case HeadersAbsurd:
			v.limit, v.remaining = 10, min(v.remaining, 10)
		case HeadersDouble:
			v.limit *= 2
		}
		out[i] = v
	}
	return out
}
