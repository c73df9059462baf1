package store

import (
	"errors"
	"fmt"

	"github.com/ontopix/sluice/bucket"
)

// Sentinel errors shared by every store. Match them with errors.Is; the root
// package re-exports them.
var (
	// ErrInvalid is matched by every validation error (a *bucket.FieldError).
	ErrInvalid = bucket.ErrInvalid
	// ErrUnknownDimension is matched by a *ConfigurationError: a request
	// named a dimension that has no bucket.
	ErrUnknownDimension = errors.New("sluice: unknown dimension")
	// ErrCostExceedsCapacity is matched by a *CostError: the cost can never
	// be granted because it exceeds the bucket's capacity.
	ErrCostExceedsCapacity = errors.New("sluice: cost exceeds capacity")
	// ErrUnknownLease reports a lease the store has no record of: it was
	// released, reclaimed by the reconciler, or never recorded.
	ErrUnknownLease = errors.New("sluice: unknown lease")
	// ErrLeaseExpired reports an operation on a lease whose TTL has passed.
	ErrLeaseExpired = errors.New("sluice: lease expired")
	// ErrUnavailable wraps every failure to reach the store (network,
	// timeout, server down). The client's failure policy applies to it.
	ErrUnavailable = errors.New("sluice: store unavailable")
	// ErrContention reports that optimistic concurrency control lost a race
	// more times than the store retries internally; the client backs off
	// and retries.
	ErrContention = errors.New("sluice: store contention")
	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("sluice: store closed")
)

// ConfigurationError reports a dimension with no bucket (the SDKs'
// ConfigurationError). It matches ErrUnknownDimension.
type ConfigurationError struct {
	// Dimension is the name that has no bucket.
	Dimension string
}

// Error implements error.
func (e *ConfigurationError) Error() string {
	return fmt.Sprintf("sluice: unknown dimension %q: no bucket is configured for it", e.Dimension)
}

// Is makes errors.Is(err, ErrUnknownDimension) true.
func (e *ConfigurationError) Is(target error) bool { return target == ErrUnknownDimension }

// CostError reports a cost larger than the bucket's capacity, which no
// amount of waiting could grant. It matches ErrCostExceedsCapacity.
type CostError struct {
	// Dimension is the bucket's name.
	Dimension string
	// Cost is the requested cost in tokens.
	Cost int64
	// Capacity is the bucket's capacity in tokens.
	Capacity int64
}

// Error implements error.
func (e *CostError) Error() string {
	return fmt.Sprintf("sluice: cost %d for %q exceeds its capacity %d and can never be granted", e.Cost, e.Dimension, e.Capacity)
}

// Is makes errors.Is(err, ErrCostExceedsCapacity) true.
func (e *CostError) Is(target error) bool { return target == ErrCostExceedsCapacity }

// Unavailable wraps err so that it matches ErrUnavailable while keeping the
// cause: errors.Is(Unavailable(op, err), ErrUnavailable) is true, and so is
// errors.Is for err's own chain.
func Unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

// ErrLeaseInUse reports an acquisition whose lease id already has a record
// for a different request (other dimensions or costs). A retry of the same
// request is answered as the grant it was and is not an error.
var ErrLeaseInUse = errors.New("sluice: lease id in use")

// LeaseInUse returns the error for an acquisition that reuses lease id for
// a different request. It matches ErrLeaseInUse.
func LeaseInUse(id LeaseID) error {
	return fmt.Errorf("%w: lease_id %s already holds a lease with other dimensions or costs; use a fresh id for a new acquisition", ErrLeaseInUse, id)
}

// ErrConflict is matched by a *ConflictError: a conditional PutBucket
// (IfAbsent, IfMatch) found the bucket not as the caller expected, and
// changed nothing.
var ErrConflict = errors.New("sluice: bucket changed concurrently")

// ConflictError reports a conditional PutBucket whose condition failed. It
// matches ErrConflict.
type ConflictError struct {
	// Dimension is the bucket's name.
	Dimension string
	// Found reports that the bucket exists (with another configuration,
	// for IfMatch); false means it does not exist.
	Found bool
}

// Error implements error.
func (e *ConflictError) Error() string {
	if !e.Found {
		return fmt.Sprintf("sluice: bucket %q no longer exists: it was deleted since it was read", e.Dimension)
	}
	return fmt.Sprintf("sluice: bucket %q was created or reconfigured by another writer since it was read", e.Dimension)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// SameConfig reports whether a and b are the same effective bucket
// configuration: the same limits (bucket.Config.Limits: type, capacity,
// refill, effective debt floor) and the same effective cost per call. It
// is the comparison of PutBucketRequest.IfMatch.
func SameConfig(a, b bucket.Config) bool {
	return a.Limits() == b.Limits() && a.Cost() == b.Cost()
}

// PutConflict returns the outcome of req's condition against the bucket
// found in the store (found false: none), or nil when the write may go
// ahead. Stores that read before they write call it.
func PutConflict(req PutBucketRequest, found bool, cur bucket.Config) error {
	switch {
	case req.IfAbsent && found:
		return &ConflictError{Dimension: req.Bucket.Name, Found: true}
	case req.IfMatch != nil && !found:
		return &ConflictError{Dimension: req.Bucket.Name}
	case req.IfMatch != nil && !SameConfig(*req.IfMatch, cur):
		return &ConflictError{Dimension: req.Bucket.Name, Found: true}
	}
	return nil
}
