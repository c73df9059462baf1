package sluice

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Errors re-exported from package store; match them with errors.Is.
var (
	// ErrInvalid is matched by every validation error; the concrete type is
	// *FieldError, which names the field and the value.
	ErrInvalid = store.ErrInvalid
	// ErrUnknownDimension is matched by *ConfigurationError.
	ErrUnknownDimension = store.ErrUnknownDimension
	// ErrCostExceedsCapacity is matched by *CostError: the cost can never be
	// granted.
	ErrCostExceedsCapacity = store.ErrCostExceedsCapacity
	// ErrLeaseExpired reports an operation on a lease whose TTL passed or
	// that the reconciler reclaimed.
	ErrLeaseExpired = store.ErrLeaseExpired
	// ErrUnknownLease reports a lease id the store has no record of.
	ErrUnknownLease = store.ErrUnknownLease
	// ErrLeaseInUse reports an acquisition that reuses a lease id held by a
	// different request (other dimensions or costs).
	ErrLeaseInUse = store.ErrLeaseInUse
	// ErrUnavailable is matched when the store cannot be reached and the
	// client fails closed.
	ErrUnavailable = store.ErrUnavailable
	// ErrClosed is returned after the store was closed.
	ErrClosed = store.ErrClosed
	// ErrContention is what an optimistic store (DynamoDB) reports when it
	// lost a race; the Client retries it with backoff and answers RETRY_IN
	// after MaxRetries, so callers of the Client do not see it.
	ErrContention = store.ErrContention
	// ErrConflict is matched by *ConflictError: a PutBucket with
	// IfUnchanged found the bucket changed since it was read, and changed
	// nothing.
	ErrConflict = store.ErrConflict
)

// ErrLeaseReleased is returned by Adjust, Settle and Extend on a lease that
// was already released.
var ErrLeaseReleased = errors.New("sluice: lease already released")

// ErrSlotTimeout is matched by *SlotTimeoutError.
var ErrSlotTimeout = errors.New("sluice: slot timeout")

// ErrLeaseLost is the cause of a SlotHandle's context cancellation when its
// lease expired or was reclaimed, or could not be renewed (whatever the
// error) until LossMargin before its expiry.
var ErrLeaseLost = errors.New("sluice: lease lost")

// FieldError reports an invalid value, naming the field. It matches
// ErrInvalid.
type FieldError = bucket.FieldError

// ConfigurationError reports a dimension with no bucket (the SDKs'
// ConfigurationError). It matches ErrUnknownDimension.
type ConfigurationError = store.ConfigurationError

// ConflictError reports a conditional PutBucket (IfUnchanged) whose
// bucket was created, reconfigured or deleted since it was read. It
// matches ErrConflict.
type ConflictError = store.ConflictError

// CostError reports a cost above a bucket's capacity. It matches
// ErrCostExceedsCapacity.
type CostError = store.CostError

// SlotTimeoutError reports that a slot was not granted before the wait's
// bound: the context's deadline, or Config.DefaultSlotTimeout (the SDKs'
// SlotTimeout). It matches ErrSlotTimeout and, when the context's deadline
// passed during the wait, the context's error too.
type SlotTimeoutError struct {
	// Dimensions are the dimensions that were asked for.
	Dimensions []string
	// Timeout is how long the caller was willing to wait.
	Timeout time.Duration
	// RetryIn is the last RETRY_IN delay the store answered (for a
	// timeout predicted from the store's answer to an earlier wait, what
	// is left of it).
	RetryIn time.Duration
	// Attempts counts acquisition attempts: 0 when the client predicted
	// the timeout from the store's answer to an earlier wait on the same
	// dimensions, less than 100 ms before, without asking the store.
	Attempts int
	// err is how a wait bounded by the context's deadline ended when the
	// deadline passed; nil otherwise.
	err error
}

// Error implements error.
func (e *SlotTimeoutError) Error() string {
	return fmt.Sprintf("sluice: no slot on %s within %s after %d attempts (last retry_in %s)",
		strings.Join(e.Dimensions, ", "), e.Timeout, e.Attempts, e.RetryIn)
}

// Is makes errors.Is(err, ErrSlotTimeout) true.
func (e *SlotTimeoutError) Is(target error) bool { return target == ErrSlotTimeout }

// Unwrap returns how a wait bounded by the context's deadline ended when
// the deadline passed (an error matching context.DeadlineExceeded), else
// nil.
func (e *SlotTimeoutError) Unwrap() error { return e.err }

func invalid(field string, v any, why string) error {
	return &FieldError{Field: field, Value: v, Reason: why}
}
