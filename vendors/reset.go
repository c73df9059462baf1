package vendors

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxHorizon is the furthest from now a reset or retry delay may lie. A value
// further away is absurd (a misread unit, an epoch read as a duration) and is
// reported as unknown rather than pausing a fleet for years.
const MaxHorizon = 366 * 24 * time.Hour

// ErrUnusableValue is the sentinel every *ValueError matches: a header or body
// value was present but could not be used, so it counts as unknown.
var ErrUnusableValue = errors.New("vendors: unusable value")

// ValueError reports a value that was present but unusable. It matches
// ErrUnusableValue. The parsers never return a half-read value next to it: the
// value is unknown.
type ValueError struct {
	// Field names where the value came from, e.g. "x-ratelimit-reset-tokens"
	// or "body error.details[1].retryDelay"; empty when the caller did not
	// say (ParseReset, ParseRetryAfter).
	Field string
	// Value is the value as received.
	Value string
	// Reason says why it is unusable and what a usable value looks like.
	Reason string
}

// Error implements error.
func (e *ValueError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("vendors: unusable value %q: %s", e.Value, e.Reason)
	}
	return fmt.Sprintf("vendors: unusable %s value %q: %s", e.Field, e.Value, e.Reason)
}

// Is makes errors.Is(err, ErrUnusableValue) true.
func (e *ValueError) Is(target error) bool { return target == ErrUnusableValue }

// ResetFormat says how a vendor writes a reset header. The zero value is
// ResetAuto, for a vendor whose format is not known.
type ResetFormat uint8

// The reset formats.
const (
	// ResetAuto guesses from the value's shape: a number with a unit is a
	// Go-style duration, a value with a date is RFC 3339 or an HTTP date,
	// and a bare number is read by magnitude: at least 1e12 is epoch
	// milliseconds, at least 1e9 is epoch seconds, anything smaller is
	// seconds from now. Use it only when the vendor's format is not known:
	// a bare 1e9 seconds is 31 years, so the guess is safe for real resets,
	// but a known format is never ambiguous.
	ResetAuto ResetFormat = iota
	// ResetDuration is a Go-style duration relative to now, as OpenAI and
	// Groq send it: "6m0s", "1s", "20ms", "7.66s", "23h47m36.648s". A
	// bare number (other than "0") has no unit and is unusable.
	ResetDuration
	// ResetRFC3339 is an absolute RFC 3339 timestamp, as Anthropic sends
	// it: "2026-11-23T14:00:05Z", with optional fractional seconds and a
	// numeric offset.
	ResetRFC3339
	// ResetSeconds is a bare number of seconds relative to now, as Azure
	// OpenAI sends it: "12", "300", "1.5". A value with a unit ("6m0s") is
	// also read, as a duration. Zero and negative values (Azure sends "0"
	// and "-1" when it has no reset) are unknown.
	ResetSeconds
	// ResetEpochSeconds is an absolute Unix time in seconds, as Anthropic's
	// unified limits send it: "1782129600".
	ResetEpochSeconds
	// ResetEpochMillis is an absolute Unix time in milliseconds, as
	// OpenRouter sends it: "1782129600000".
	ResetEpochMillis
)

// String returns the format's name, e.g. "duration".
func (f ResetFormat) String() string {
	switch f {
	case ResetAuto:
		return "auto"
	case ResetDuration:
		return "duration"
	case ResetRFC3339:
		return "rfc3339"
	case ResetSeconds:
		return "seconds"
	case ResetEpochSeconds:
		return "epoch-seconds"
	case ResetEpochMillis:
		return "epoch-millis"
	}
	return fmt.Sprintf("ResetFormat(%d)", uint8(f))
}

// ParseReset turns a reset header value into the instant the vendor's limit
// is back to full, given now, in now's location. It returns a *ValueError (matching
// ErrUnusableValue) when the value is empty, malformed, zero, negative, not
// finite, not after now, or more than MaxHorizon after now: a reset that is
// unknown, never "reset now". On success the instant is after now and at most
// now+MaxHorizon. It never panics.
func ParseReset(f ResetFormat, value string, now time.Time) (time.Time, error) {
	v := strings.TrimSpace(value)
	if v == "" {
		return time.Time{}, &ValueError{Value: value, Reason: "empty"}
	}
	at, reason := parseReset(f, v, now)
	if reason != "" {
		return time.Time{}, &ValueError{Value: value, Reason: reason}
	}
	return at, nil
}

func parseReset(f ResetFormat, v string, now time.Time) (time.Time, string) {
	switch f {
	case ResetDuration:
		d, reason := parseDuration(v)
		return after(now, d, reason)
	case ResetRFC3339:
		return absoluteRFC3339(v, now)
	case ResetSeconds:
		read := secondsDuration
		if hasUnit(v) {
			read = parseDuration
		}
		d, reason := read(v)
		return after(now, d, reason)
	case ResetEpochSeconds:
		return epoch(v, 1, now)
	case ResetEpochMillis:
		return epoch(v, 1e-3, now)
	case ResetAuto:
		return parseAuto(v, now)
	}
	return time.Time{}, fmt.Sprintf("unknown reset format %d", uint8(f))
}

// parseAuto reads a value of unknown format by its shape, then a bare number
// by its magnitude.
func parseAuto(v string, now time.Time) (time.Time, string) {
	if looksRFC3339(v) {
		return absoluteRFC3339(v, now)
	}
	if t, err := http.ParseTime(v); err == nil {
		return checkInstant(t, now)
	}
	if hasUnit(v) {
		d, reason := parseDuration(v)
		return after(now, d, reason)
	}
	n, reason := parseDecimal(v)
	if reason != "" {
		return time.Time{}, reason + "; want a duration (6m0s), seconds (12), epoch seconds, epoch milliseconds or an RFC 3339 time"
	}
	switch {
	case n >= 1e12:
		return epoch(v, 1e-3, now)
	case n >= 1e9:
		return epoch(v, 1, now)
	}
	d, reason := secondsDuration(v)
	return after(now, d, reason)
}

// ParseRetryAfter reads a retry-after header (RFC 9110): a number of seconds,
// whole or decimal ("33", "1.5"), or an HTTP date ("Sun, 06 Nov 1994 08:49:37
// GMT", and the obsolete RFC 850 and ANSI C forms http.ParseTime accepts),
// which is converted to a delay from now. It returns a *ValueError (matching
// ErrUnusableValue) when the value is empty, malformed, zero, negative, a date
// not after now, or more than MaxHorizon away. It never panics.
func ParseRetryAfter(value string, now time.Time) (time.Duration, error) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, &ValueError{Value: value, Reason: "empty"}
	}
	if t, err := http.ParseTime(v); err == nil {
		at, reason := checkInstant(t, now)
		if reason != "" {
			return 0, &ValueError{Value: value, Reason: "HTTP date " + reason}
		}
		return at.Sub(now), nil
	}
	d, reason := secondsDuration(v)
	if reason != "" {
		return 0, &ValueError{Value: value, Reason: reason + " (or an HTTP date)"}
	}
	return d, nil
}

// ParseRetryAfterMs reads a retry-after-ms header: a number of milliseconds,
// whole or decimal ("644", "20.5"). It returns a *ValueError (matching
// ErrUnusableValue) when the value is empty, malformed, zero, negative or more
// than MaxHorizon away. It never panics.
func ParseRetryAfterMs(value string) (time.Duration, error) {
	v := strings.TrimSpace(value)
	n, reason := parseDecimal(v)
	if v == "" {
		reason = "empty"
	}
	switch {
	case reason != "":
	case n < 0:
		reason = "negative"
	case n > float64(MaxHorizon.Milliseconds()):
		reason = "more than a year away"
	}
	var d time.Duration
	if reason == "" {
		d = time.Duration(math.Round(n * 1e6))
		reason = checkDelay(d)
	}
	if reason != "" {
		return 0, &ValueError{Value: value, Reason: reason + "; want a number of milliseconds such as 644"}
	}
	return d, nil
}

// after returns now+d, or the reason d was refused.
func after(now time.Time, d time.Duration, reason string) (time.Time, string) {
	if reason != "" {
		return time.Time{}, reason
	}
	return now.Add(d).Round(0), ""
}

// parseDuration reads a Go-style duration and checks its range. A bare "0"
// is zero; any other bare number lacks a unit.
func parseDuration(v string) (time.Duration, string) {
	if !hasUnit(v) {
		if n, reason := parseDecimal(v); reason == "" {
			if n == 0 {
				return 0, checkDelay(0)
			}
			return 0, "a bare number has no unit; want a Go-style duration such as 6m0s, 1s or 20ms"
		}
		return 0, "not a Go-style duration such as 6m0s, 1s or 20ms"
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, "not a Go-style duration such as 6m0s, 1s or 20ms"
	}
	return d, checkDelay(d)
}

// secondsDuration reads a bare decimal number of seconds and checks its range.
func secondsDuration(v string) (time.Duration, string) {
	n, reason := parseDecimal(v)
	if reason != "" {
		return 0, reason + "; want a number of seconds such as 12 or 1.5"
	}
	switch {
	case n < 0:
		return 0, "negative"
	case n > MaxHorizon.Seconds():
		return 0, "more than a year away"
	}
	d := time.Duration(math.Round(n * 1e9))
	return d, checkDelay(d)
}

// checkDelay accepts a delay in (0, MaxHorizon].
func checkDelay(d time.Duration) string {
	switch {
	case d < 0:
		return "negative"
	case d == 0:
		return "zero: the vendor names no instant to wait for"
	case d > MaxHorizon:
		return "more than a year away"
	}
	return ""
}

// epoch reads a Unix time in units of scale seconds.
func epoch(v string, scale float64, now time.Time) (time.Time, string) {
	n, reason := parseDecimal(v)
	if reason != "" {
		return time.Time{}, reason + "; want a Unix time"
	}
	sec := n * scale
	nowSec := float64(now.UnixNano()) / 1e9
	switch {
	case n < 0:
		return time.Time{}, "negative"
	case n == 0:
		return time.Time{}, "zero: the vendor names no instant to wait for"
	case sec <= nowSec:
		return time.Time{}, pastReason(nowSec-sec > MaxHorizon.Seconds())
	case sec-nowSec > MaxHorizon.Seconds():
		return time.Time{}, "more than a year away"
	}
	whole := math.Floor(sec)
	return checkInstant(time.Unix(int64(whole), int64(math.Round((sec-whole)*1e9))), now)
}

// reasonPassed is the reason for a well-formed instant that has passed, by up
// to MaxHorizon: the limit is already back to full, or the clocks disagree.
// ParseHeaders does not list it among the Problems.
const reasonPassed = "not after now: already passed"

func pastReason(long bool) string {
	if long {
		return "not after now: more than a year in the past"
	}
	return reasonPassed
}

// absoluteRFC3339 reads an RFC 3339 timestamp.
func absoluteRFC3339(v string, now time.Time) (time.Time, string) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, "not an RFC 3339 time such as 2026-11-23T14:00:05Z"
	}
	return checkInstant(t, now)
}

// checkInstant accepts an instant in (now, now+MaxHorizon] and returns it in
// now's location, with no monotonic reading.
func checkInstant(t, now time.Time) (time.Time, string) {
	switch {
	case !t.After(now):
		return time.Time{}, pastReason(now.Sub(t) > MaxHorizon)
	case t.Sub(now) > MaxHorizon:
		return time.Time{}, "more than a year away"
	}
	return t.In(now.Location()).Round(0), ""
}

// looksRFC3339 reports whether v has the shape of a date-time: digits, a dash
// and a T, as in 2026-11-23T14:00:05Z.
func looksRFC3339(v string) bool {
	return len(v) >= 10 && v[4] == '-' && strings.ContainsAny(v, "Tt")
}

// hasUnit reports whether v looks like a number with a unit, such as 6m0s:
// it starts with a digit, a sign or a dot, and ends in a letter.
func hasUnit(v string) bool {
	if len(v) < 2 {
		return false
	}
	first, last := v[0], v[len(v)-1]
	return (first >= '0' && first <= '9' || first == '+' || first == '-' || first == '.') &&
		(last >= 'a' && last <= 'z' || last >= 'A' && last <= 'Z' || last >= 0x80)
}

// parseDecimal reads an optionally signed decimal number: digits with an
// optional fraction. Exponents, hex, "Inf" and "NaN" are not numbers here.
func parseDecimal(v string) (float64, string) {
	body := v
	if body != "" && (body[0] == '+' || body[0] == '-') {
		body = body[1:]
	}
	whole, frac, dot := strings.Cut(body, ".")
	if !allDigits(whole) || dot && !allDigits(frac) {
		return 0, "not a number"
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsInf(n, 0) {
		return 0, "too large"
	}
	return n, ""
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
