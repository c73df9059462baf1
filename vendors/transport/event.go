package transport

import (
	"context"
	"time"

	"github.com/ontopix/sluice/vendors"
)

// Outcome is how a call through the Transport ended for the buckets.
type Outcome uint8

// The outcomes.
const (
	// Passed is a request to a routed vendor host that the Transport did
	// not meter: its endpoint is unknown (WithUnknownEndpoints), its body
	// could not be estimated, or its model has no profile (PassModel).
	// Requests to hosts without a route are sent unchanged and reported
	// nowhere.
	Passed Outcome = iota
	// Counted is an unknown endpoint that took one request and nothing
	// else (CountRequests).
	Counted
	// Settled is a call whose response reported its usage: every token
	// dimension was settled to it, never below the admission charge on a
	// limit read as vendors.AdmissionKept.
	Settled
	// Partial is a call whose usage was not reported in full: a stream
	// cut short (context cancelled, connection lost, body closed early),
	// a body never read that timed out, a response without usage. What
	// was seen is settled, never below the admission charge: the vendor
	// may have counted more than the client received.
	Partial
	// Refunded is a call the vendor never saw (the connection could not
	// be made, the name did not resolve, the TLS handshake failed, nothing
	// of the request was written): every charge, requests included, was
	// refunded.
	Refunded
	// Charged is a call that failed after the request may have reached
	// the vendor (a timeout or reset after sending): the admission
	// charge is kept in full.
	Charged
	// Rejected is a 4xx response, 429s included: the vendor counted the
	// request but no tokens, so the token charges were refunded and the
	// request kept (Anthropic counts nothing for a rejected request, so
	// its request is refunded too).
	Rejected
	// Failed is a 5xx response: what the vendor counted is unknown, so
	// the admission charge is kept in full.
	Failed
	// Denied is a call that never got its charges: no slot within the
	// request's deadline, a request cancelled while it waited, a charge
	// above a bucket's capacity, or a store error. The request was not
	// sent, and a reservation the wait had made was cancelled.
	Denied
)

// String returns the outcome's name, e.g. "settled".
func (o Outcome) String() string {
	switch o {
	case Passed:
		return "passed"
	case Counted:
		return "counted"
	case Settled:
		return "settled"
	case Partial:
		return "partial"
	case Refunded:
		return "refunded"
	case Charged:
		return "charged"
	case Rejected:
		return "rejected"
	case Failed:
		return "failed"
	case Denied:
		return "denied"
	}
	return "unknown"
}

// Event describes one request (one attempt: the SDKs' retries are separate
// requests) once the Transport is done with it: after its response body
// was read or closed, or after it failed. The slices are the event's own.
type Event struct {
	// Vendor, API and Model say what was called; Model is the Azure
	// deployment for a deployment path.
	Vendor vendors.Vendor
	API    API
	Model  string
	// Outcome is how the call ended for the buckets.
	Outcome Outcome
	// Status is the HTTP status; 0 when no response came.
	Status int
	// Estimate is the request's estimate; zero for Passed and Counted.
	Estimate Estimate
	// Admitted is what was acquired, one charge per dimension.
	Admitted []vendors.Charge
	// Final is what each dimension was left at: the settlement, the
	// refund (0) or the admission charge kept.
	Final []vendors.Charge
	// Usage is what the response reported (partly, for Partial).
	Usage vendors.Usage
	// Waited is how long the call waited for its charges, by the
	// Transport's clock (WithClock). Attempts counts the store decisions
	// the wait took (sluice.WaitEvent.Attempts): 1 for a reservation,
	// even one that slept until it was valid; one per poll with
	// WithPolling.
	Waited   time.Duration
	Attempts int
	// Latency is how long the vendor took to answer, by the Transport's
	// clock: from sending the request to the response's headers (for a
	// stream, the time to its first byte); 0 when no response came.
	// Duration runs from sending the request to the end of the call: the
	// body read or closed, or the failure; 0 for a call never sent.
	Latency, Duration time.Duration
	// Reaction is what the vendor's response did to the buckets
	// (cooldown, sync, limit following); nil when no response came. Its
	// Drift is how far Sluice's balances were from the vendor's remaining
	// headers (also summed in Stats.Drift).
	Reaction *vendors.Reaction
	// VendorErr is the response's own error for a non-2xx status: it
	// matches vendors.ErrRateLimited, ErrQuotaExhausted,
	// ErrRequestTooLarge, ErrOverloaded… The SDK receives the response
	// unchanged and reports it its own way; this is the same verdict
	// as Sluice reads it.
	VendorErr error
	// PassReason says why a Passed request was not metered: "unknown
	// endpoint", "body not estimable: …", "model has no profile".
	PassReason string
	// UsageCapped reports that the response reported more usage than
	// the request could have used (more output than its max_tokens, or
	// max_completion_tokens, or max_output_tokens, times n, or than
	// WithOutputCeiling without one; more input than its body could
	// hold); Usage is what was reported and Final what was charged: the
	// usage capped to those bounds. The excess is never charged.
	UsageCapped bool
	// Err is what went wrong on Sluice's side or on the way: the
	// acquisition's error for Denied, the round trip's error for
	// Refunded and Charged, and any store error while settling,
	// releasing or reacting, joined.
	Err error
}

// EventFunc receives Events. It is called synchronously on the goroutine
// that finished the call (the one reading or closing the body, or
// RoundTrip's), so it must be fast and safe for concurrent use.
type EventFunc func(context.Context, Event)
