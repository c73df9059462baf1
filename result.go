package sluice

import (
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// LimitType is a bucket's limit type: Requests, Tokens or Concurrent.
type LimitType = bucket.LimitType

// The limit types.
const (
	Requests   = bucket.Requests
	Tokens     = bucket.Tokens
	Concurrent = bucket.Concurrent
)

// Outcome is the answer to an acquisition.
type Outcome uint8

const (
	// Granted means every dimension was debited and Result.Lease is set.
	Granted Outcome = iota + 1
	// RetryIn means nothing was debited; retry after Result.RetryIn.
	RetryIn
)

// String returns "GRANTED" or "RETRY_IN".
func (o Outcome) String() string {
	switch o {
	case Granted:
		return "GRANTED"
	case RetryIn:
		return "RETRY_IN"
	}
	return "UNKNOWN"
}

// Request is one dimension of an acquisition: a Dimension naming the
// bucket, e.g. "openai#tpm", and a Cost in tokens. AcquireMany, Wait,
// SlotMany and WithSlotMany take a Cost of at least 1; the store's own
// calls read a Cost of 0 as the bucket's cost per call.
type Request = store.Item

// Result is the answer to Acquire or AcquireMany.
type Result struct {
	// Outcome is Granted or RetryIn.
	Outcome Outcome
	// RetryIn is how long to wait before retrying, when Outcome is RetryIn:
	// exact for requests and tokens dimensions, a hint for concurrent ones.
	RetryIn time.Duration
	// Lease is the granted lease; nil unless Outcome is Granted.
	Lease *Lease
	// Dimensions has one entry per requested dimension, in request order.
	// It is empty for a degraded grant.
	Dimensions []DimensionResult
	// Degraded reports a grant made without the store under FailOpen.
	Degraded bool
	// ahead is, on a queued denial, the most waiter tickets ahead of the
	// request's in its concurrent dimensions' queues.
	ahead int
}

// Granted reports whether the outcome is Granted.
func (r Result) Granted() bool { return r.Outcome == Granted }
