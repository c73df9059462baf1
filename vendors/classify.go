package vendors

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Kind is what a vendor response means for the caller. The zero value is
// OtherError.
type Kind uint8

// The kinds, from Classify.
const (
	// OtherError is any failure that is none of the kinds below (a bad
	// request, an authentication error, a 500). Not retryable by this
	// package's reckoning; the caller's own policy applies.
	OtherError Kind = iota
	// OK is a 2xx response.
	OK
	// RateLimited is a retryable rate limit: the vendor's limit is tighter
	// than the caller's buckets right now. Cool the whole fleet down until
	// CooldownUntil, when known, then retry.
	RateLimited
	// QuotaExhausted is a spend or quota cap (OpenAI insufficient_quota,
	// Anthropic enforced_spend_limit_reached, a Gemini per-day quota,
	// ElevenLabs quota_exceeded). Retrying fails until the quota is raised
	// or the period rolls over: stop, and tell someone.
	QuotaExhausted
	// TooLarge is a single request bigger than the limit itself (or than
	// the vendor accepts). It can never succeed as sent: fail fast, no
	// cooldown.
	TooLarge
	// Overloaded is the vendor's own capacity (Anthropic 529, ElevenLabs
	// system_busy, Azure "temporarily unable to process", any 503). Back
	// off and retry; it says nothing about the caller's quota.
	Overloaded
	// ConcurrencyLimited is too many requests in flight (ElevenLabs
	// too_many_concurrent_requests): queue behind the caller's own
	// requests and retry soon; no exponential back-off needed.
	ConcurrencyLimited
)

// String returns the kind's name, e.g. "rate_limited".
func (k Kind) String() string {
	switch k {
	case OtherError:
		return "other_error"
	case OK:
		return "ok"
	case RateLimited:
		return "rate_limited"
	case QuotaExhausted:
		return "quota_exhausted"
	case TooLarge:
		return "too_large"
	case Overloaded:
		return "overloaded"
	case ConcurrencyLimited:
		return "concurrency_limited"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Sentinel errors, one per failing kind; Classification.Err returns an *Error
// that matches the one for its kind.
var (
	// ErrRateLimited matches a RateLimited response: retry after the delay.
	ErrRateLimited = errors.New("vendors: rate limited")
	// ErrQuotaExhausted matches a QuotaExhausted response: retrying fails
	// until the quota is raised or its period rolls over.
	ErrQuotaExhausted = errors.New("vendors: quota exhausted")
	// ErrRequestTooLarge matches a TooLarge response: the request can never
	// succeed as sent.
	ErrRequestTooLarge = errors.New("vendors: request too large")
	// ErrOverloaded matches an Overloaded response: back off and retry.
	ErrOverloaded = errors.New("vendors: vendor overloaded")
	// ErrConcurrencyLimited matches a ConcurrencyLimited response: queue
	// and retry.
	ErrConcurrencyLimited = errors.New("vendors: too many concurrent requests")
	// ErrVendor matches an OtherError response.
	ErrVendor = errors.New("vendors: vendor error")
)

// Error is a failed vendor response as an error value. It matches (errors.Is)
// the sentinel for its Kind, and ErrVendor for OtherError.
type Error struct {
	// Vendor is the vendor that answered.
	Vendor Vendor
	// Kind is the classification.
	Kind Kind
	// Status is the HTTP status code.
	Status int
	// Code is the vendor's error code or type, e.g. "insufficient_quota";
	// empty when the body named none.
	Code string
	// Message is the vendor's message, verbatim; empty when none.
	Message string
}

// Error implements error: the vendor, what happened, the status and code,
// and the vendor's message.
func (e *Error) Error() string {
	s := fmt.Sprintf("vendors: %s %s (HTTP %d", e.Vendor, kindPhrase(e.Kind), e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	s += ")"
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is matches the sentinel for e.Kind.
func (e *Error) Is(target error) bool { return target == sentinel(e.Kind) }

func sentinel(k Kind) error {
	switch k {
	case RateLimited:
		return ErrRateLimited
	case QuotaExhausted:
		return ErrQuotaExhausted
	case TooLarge:
		return ErrRequestTooLarge
	case Overloaded:
		return ErrOverloaded
	case ConcurrencyLimited:
		return ErrConcurrencyLimited
	}
	return ErrVendor
}

func kindPhrase(k Kind) string {
	switch k {
	case RateLimited:
		return "rate limit reached"
	case QuotaExhausted:
		return "quota exhausted, retrying will not help"
	case TooLarge:
		return "request too large for the limit, retrying will not help"
	case Overloaded:
		return "overloaded"
	case ConcurrencyLimited:
		return "too many concurrent requests"
	}
	return "error"
}

// Classification is what Classify made of one response. It is a plain value.
type Classification struct {
	// Vendor is the vendor that answered.
	Vendor Vendor
	// Status is the HTTP status code.
	Status int
	// Kind is what the response means; see the Kind constants.
	Kind Kind
	// Metric is the limit the body names ("on tokens per min (TPM)",
	// type "requests", a Gemini quotaId); empty when it names none.
	Metric Metric
	// RetryAfter is the vendor's delay, from retry-after-ms, else
	// retry-after, else the body (Gemini RetryInfo.retryDelay, then a
	// "try again in 644ms" or "retry after 33 seconds" message).
	RetryAfter RetryDelay
	// Code is the vendor's error code or type, e.g. "rate_limit_exceeded",
	// "insufficient_quota", "overloaded_error", "RESOURCE_EXHAUSTED" or
	// "too_many_concurrent_requests"; empty when none.
	Code string
	// Message is the vendor's message, verbatim; empty when none.
	Message string
	// QuotaID is the first Gemini quota violation's quotaId, e.g.
	// "GenerateRequestsPerDayPerProjectPerModel-FreeTier".
	QuotaID string
	// Limit and Requested are the numbers from a "Limit 30000, ...
	// Requested 385" message, in the metric's unit; their Header is
	// "body".
	Limit, Requested Count
	// Signals is what the response's headers said (ParseHeaders).
	Signals Signals
	// At is the now Classify was given: the time the response arrived.
	At time.Time
}

// Retryable reports whether the same request may succeed later:
// RateLimited, Overloaded and ConcurrencyLimited.
func (c Classification) Retryable() bool {
	return c.Kind == RateLimited || c.Kind == Overloaded || c.Kind == ConcurrencyLimited
}

// CooldownUntil returns the instant before which no process should call the
// vendor on this limit again: At plus the retry delay. It is known only for
// RateLimited with a known delay; a quota, size, overload or concurrency
// problem is not a reason to pause the fleet's bucket.
func (c Classification) CooldownUntil() (time.Time, bool) {
	if c.Kind != RateLimited || !c.RetryAfter.Known {
		return time.Time{}, false
	}
	return c.At.Add(c.RetryAfter.Delay), true
}

// Err returns nil for OK, else an *Error that matches the sentinel for the
// kind (errors.Is(err, ErrQuotaExhausted), ...).
func (c Classification) Err() error {
	if c.Kind == OK {
		return nil
	}
	return &Error{Vendor: c.Vendor, Kind: c.Kind, Status: c.Status, Code: c.Code, Message: c.Message}
}

// maxBody is the largest body Classify reads; a longer one is classified by
// its status and headers only.
const maxBody = 1 << 20

// Classify says what a vendor response means: status is its HTTP status
// code, h its headers and body its body (or nil; a body longer than 1 MiB is
// ignored, so read at most that much). now is when the response arrived.
// It reads the error bodies of OpenAI and the OpenAI-compatible vendors
// ({"error":{"message","type","code"}}), Anthropic ({"type":"error",
// "error":{"type","message","details"}}), Gemini ({"error":{"code","status",
// "details":[QuotaFailure, RetryInfo]}}), ElevenLabs ({"detail":{"status",
// "message"}}) and Azure ({"error":{"code","message"}}). A body that is not
// JSON is fine: the status and headers decide. The checks, first match wins:
//
//  1. 2xx is OK.
//  2. QuotaExhausted: insufficient_quota, enforced_spend_limit_reached, a
//     Gemini quotaId containing "PerDay", quota_exceeded, OpenRouter's
//     free-models-per-day cap, Anthropic's "reached your specified API
//     usage limits" and "credit balance is too low".
//  3. TooLarge: HTTP 413, request_too_large, "Request too large",
//     max_character_limit_exceeded.
//  4. ConcurrencyLimited: too_many_concurrent_requests.
//  5. Overloaded: HTTP 529 or 503, overloaded_error, system_busy,
//     "temporarily unable to process".
//  6. RateLimited: HTTP 429.
//  7. OtherError.
//
// Classify never panics.
func Classify(v Vendor, status int, h http.Header, body []byte, now time.Time) Classification {
	c := Classification{Vendor: v, Status: status, At: now, Signals: ParseHeaders(v, h, now)}
	c.RetryAfter = c.Signals.RetryAfter
	if status >= 200 && status < 300 {
		c.Kind = OK
		return c
	}
	var b parsedBody
	if len(body) <= maxBody {
		b = parseBody(body)
	}
	c.Code, c.Message, c.QuotaID = b.code, b.message, b.quotaID
	c.Metric = b.metric
	c.Limit, c.Requested = b.limit, b.requested
	if !c.RetryAfter.Known && b.retry.Known {
		c.RetryAfter = b.retry
	}
	c.Signals.Problems = append(c.Signals.Problems, b.problems...)
	c.Kind = kindOf(status, b)
	return c
}

func kindOf(status int, b parsedBody) Kind {
	switch {
	case b.has("insufficient_quota", "enforced_spend_limit_reached", "quota_exceeded") || b.perDay ||
		b.mentions("free-models-per-day") || b.mentions("reached your specified api usage limits") || b.mentions("credit balance is too low"):
		return QuotaExhausted
	case status == http.StatusRequestEntityTooLarge || b.has("request_too_large", "max_character_limit_exceeded") || b.mentions("request too large"):
		return TooLarge
	case b.has("too_many_concurrent_requests"):
		return ConcurrencyLimited
	case status == 529 || status == http.StatusServiceUnavailable || b.has("overloaded_error", "system_busy") || b.mentions("temporarily unable to process"):
		return Overloaded
	case status == http.StatusTooManyRequests:
		return RateLimited
	}
	return OtherError
}
