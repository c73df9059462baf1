package sluice

import (
	"strconv"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Millitokens is a balance in thousandths of a token. Balances are kept in
// millitokens so that a refill of a few tokens per minute advances every
// millisecond; costs are whole tokens. Convert with Tokens, never by hand.
type Millitokens int64

// Tokens returns m in tokens (m/1000).
func (m Millitokens) Tokens() float64 { return float64(m) / bucket.Milli }

// String formats m in tokens with up to three decimals, e.g. "99.5".
func (m Millitokens) String() string {
	return strconv.FormatFloat(m.Tokens(), 'f', -1, 64)
}

// DimensionResult reports one dimension of an acquisition.
type DimensionResult struct {
	// Dimension names the bucket.
	Dimension string
	// Type is the bucket's limit type.
	Type LimitType
	// Cost is the cost in tokens that was (or would have been) charged.
	Cost int64
	// Capacity is the bucket's capacity in tokens.
	Capacity int64
	// Remaining is the balance after the grant or, on a denial, the
	// balance available now.
	Remaining Millitokens
	// RetryIn is this dimension's own wait; 0 when it could have been
	// granted.
	RetryIn time.Duration
}

// Settlement reports an Adjust or Settle.
type Settlement struct {
	// Held is the lease's cost on the dimension afterwards, in tokens.
	Held int64
	// Applied is the change actually made to the balance, positive for a
	// charge; less than asked when the debt floor or the capacity clamped
	// it.
	Applied Millitokens
	// Remaining is the balance afterwards.
	Remaining Millitokens
}

// Penalty reports a Penalize.
type Penalty struct {
	// Before and After are the balances around the penalty.
	Before, After Millitokens
}

// BucketState is a bucket's configuration and state at a point in time.
type BucketState struct {
	// Bucket is the bucket's name and configuration.
	Bucket
	// Tokens is the balance at Now, refilled.
	Tokens Millitokens
	// LastRefill is the refill time that goes with Tokens: the pair is the
	// bucket's state refilled to Now, so TimeUntil gives exact waits.
	LastRefill time.Time
	// CooldownUntil is the end of the bucket's last cooldown (see
	// Client.Cooldown); zero when it never had one or a reset ended it. A
	// time at or before Now means the cooldown is over (see CoolingDown).
	CooldownUntil time.Time
	// ReservedUntil is the latest instant at which a reservation on the
	// bucket becomes valid (see WithPolling for waiting without one); a
	// time after Now means callers wait in line for that long. Zero when
	// the bucket never had a reservation.
	ReservedUntil time.Time
	// Waiters counts the callers waiting in line for a concurrent
	// bucket's slots, on stores that keep such a line; 0 otherwise.
	Waiters int
	// ActiveLeases counts the bucket's lease records, expired or not.
	ActiveLeases int
	// NextExpiry is the earliest expiry among those records (zero if none).
	NextExpiry time.Time
	// Now is the time the state was computed at (the store's clock, if it
	// keeps its own).
	Now time.Time
}

// CoolingDown reports whether the bucket is in a cooldown at s.Now:
// nothing is granted on it before s.CooldownUntil.
func (s BucketState) CoolingDown() bool { return s.Now.Before(s.CooldownUntil) }

// LeaseRecord is a lease as the store records it, for listings and for
// operations on a lease by id from another process.
type LeaseRecord struct {
	// ID is the lease's id, a UUID.
	ID string
	// Dimensions are the lease's dimensions with their current costs.
	Dimensions []Request
	// Caller names who acquired it.
	Caller string
	// CreatedAt and ExpiresAt bound its life.
	CreatedAt, ExpiresAt time.Time
}

// LeaseQuery selects lease records for Client.Leases.
type LeaseQuery struct {
	// Dimension, when set, keeps leases that include it.
	Dimension string
	// ExpiredOnly keeps leases whose expiry is at or before now (the
	// client's clock).
	ExpiredOnly bool
	// Limit bounds the result; 0 means no bound.
	Limit int
}

// ReleaseResult reports Client.ReleaseLease.
type ReleaseResult struct {
	// Released reports that the store found the lease's record and deleted
	// it; false when it was already released or reclaimed.
	Released bool
	// Restored lists what the lease's concurrent dimensions gave back.
	Restored []Restored
}

// Restored is one concurrent dimension's cost returned to its bucket.
type Restored = store.Restored

// ReconcileOptions configures one Client.Reconcile batch.
type ReconcileOptions struct {
	// Limit bounds the number of expired lease records processed; 0 means
	// 1000.
	Limit int
}

// ReconcileResult reports one reconcile batch.
type ReconcileResult struct {
	// Processed counts expired leases processed: cost returned or record
	// deleted ("restored" in the reconciler's log and JSON).
	Processed int
	// Reclaimed counts concurrent leases whose cost went back to a bucket.
	Reclaimed int
	// AlreadyCapped counts concurrent leases whose restore the capacity
	// guard limited.
	AlreadyCapped int
	// Orphans counts records deleted because their bucket is gone.
	Orphans int
	// Dimensions lists, sorted, the dimensions that had expired leases.
	Dimensions []string
	// More reports that expired records remain beyond Limit.
	More bool
}

func dimensionResults(dst []DimensionResult, items []store.ItemResult) []DimensionResult {
	for _, it := range items {
		dst = append(dst, DimensionResult{
			Dimension: it.Dimension, Type: it.Type, Cost: it.Cost, Capacity: it.Capacity,
			Remaining: Millitokens(it.Remaining), RetryIn: it.RetryIn,
		})
	}
	return dst
}

func settlement(r store.Settlement) Settlement {
	return Settlement{Held: r.Held, Applied: Millitokens(r.Applied), Remaining: Millitokens(r.Remaining)}
}

func bucketState(s store.BucketState) BucketState {
	b := BucketState{
		Bucket: s.Bucket, Tokens: Millitokens(s.Tokens), LastRefill: time.UnixMilli(s.LastRefill).UTC(),
		ActiveLeases: s.ActiveLeases, NextExpiry: s.NextExpiry, Now: s.Now, Waiters: s.Waiters,
	}
	if s.CooldownUntil != 0 {
		b.CooldownUntil = time.UnixMilli(s.CooldownUntil).UTC()
	}
	if s.ReservedUntil != 0 {
		b.ReservedUntil = time.UnixMilli(s.ReservedUntil).UTC()
	}
	return b
}

func bucketStates(ss []store.BucketState) []BucketState {
	out := make([]BucketState, len(ss))
	for i, s := range ss {
		out[i] = bucketState(s)
	}
	return out
}

func leaseRecord(l store.LeaseRecord) LeaseRecord {
	return LeaseRecord{ID: l.ID.String(), Dimensions: l.Items, Caller: l.Caller, CreatedAt: l.CreatedAt, ExpiresAt: l.ExpiresAt}
}
