package sluice

import (
	"context"
	"time"
)

// Observer receives the Client's decisions as they happen, for metrics and
// tracing. Every field is optional: a nil func is skipped at no cost, in the
// manner of net/http/httptrace. The funcs are called synchronously on the
// caller's goroutine, after the decision, so they must be fast and safe for
// concurrent use; they must not call back into the Client. The slices in
// the events are the Client's own and valid only during the call.
//
// The adapters in package sluice/observe/prometheus and
// sluice/observe/otel build an Observer; Observers combines several.
type Observer struct {
	// Acquired is called after every acquisition decision (Acquire,
	// AcquireMany and each attempt of Wait and WithSlot): granted,
	// retry-in, degraded or failed.
	Acquired func(context.Context, AcquireEvent)
	// Waited is called when Wait, WithSlot or Slot returns: how long the
	// caller waited and whether it got a slot.
	Waited func(context.Context, WaitEvent)
	// Settled is called after every Lease.Adjust or Lease.Settle that
	// reached the store.
	Settled func(context.Context, SettleEvent)
	// Penalized is called after every Penalize.
	Penalized func(context.Context, PenaltyEvent)
	// Cooled is called after every Cooldown and CooldownFor that reached
	// the store.
	Cooled func(context.Context, CooldownEvent)
	// Synced is called after every Sync.
	Synced func(context.Context, SyncEvent)
	// Released is called after every release of a lease.
	Released func(context.Context, ReleaseEvent)
	// LeaseLost is called when a SlotHandle gives its lease up (renewals
	// failed, or the store said the lease expired or was reclaimed).
	LeaseLost func(context.Context, LeaseLostEvent)
	// Reconciled is called after every Client.Reconcile batch.
	Reconciled func(context.Context, ReconcileEvent)
	// StoreError is called for every store call that failed, with the
	// kind of failure.
	StoreError func(context.Context, StoreErrorEvent)
	// Recreated is called when the client re-created a declared bucket
	// the store had lost (WithBuckets): only by the client whose creation
	// succeeded, so a fleet counts each loss once.
	Recreated func(context.Context, RecreateEvent)
}

// RecreateEvent describes a declared bucket re-created after the store
// lost it (WithBuckets).
type RecreateEvent struct {
	// Dimension is the re-created bucket.
	Dimension string
	// Op is the operation that found it missing: acquire, reserve, peek,
	// penalize, cooldown or sync.
	Op string
}

// AcquireEvent describes one acquisition decision.
type AcquireEvent struct {
	// Dimensions lists the dimensions asked for, in request order.
	Dimensions []Request
	// Caller is the caller name the acquisition was made for: the one
	// given with WithCaller, else Config.Caller; "" when neither names
	// one.
	Caller string
	// Outcome is Granted or RetryIn; zero when Err is set.
	Outcome Outcome
	// RetryIn is the wait the store answered, for a RetryIn outcome.
	RetryIn time.Duration
	// Results has one entry per dimension, in request order, when the store
	// answered (it is empty for a degraded grant or an error). On a RetryIn
	// outcome, an entry's RetryIn tells whether that dimension was short
	// (non-zero) and its own wait.
	Results []DimensionResult
	// Degraded reports a grant made without the store (fail open).
	Degraded bool
	// HandedOver reports a grant of a lease that a holder in this process
	// handed over as it released it, with no store call (see
	// Lease.Release); Duration is 0.
	HandedOver bool
	// Duration is how long the decision took, store round trips included.
	Duration time.Duration
	// Err is the error the acquisition returned, if any.
	Err error
}

// WaitEvent describes the end of a wait for a slot.
type WaitEvent struct {
	// Dimensions lists the dimensions asked for.
	Dimensions []Request
	// Caller is the caller name the wait was made for: the one given with
	// WithCaller, else Config.Caller; "" when neither names one.
	Caller string
	// Waited is the time from the first attempt to the answer.
	Waited time.Duration
	// Attempts counts the acquisitions made.
	Attempts int
	// Granted reports that a slot was obtained.
	Granted bool
	// TimedOut reports that the wait ended with a *SlotTimeoutError.
	TimedOut bool
	// Err is the error the wait returned, if any.
	Err error
}

// SettleEvent describes one settlement of a lease's estimate.
type SettleEvent struct {
	// Dimension is the settled dimension.
	Dimension string
	// Caller is the caller name recorded on the lease (Lease.Caller).
	Caller string
	// Estimate is the lease's cost before, Actual after, in tokens.
	Estimate, Actual int64
	// Applied is the change to the balance in millitokens (positive for a
	// charge); it differs from (Actual-Estimate)*1000 when the debt floor
	// or the capacity clamped it.
	Applied int64
	// Late reports a charge made after the lease expired.
	Late bool
	// Err is the error the settlement returned, if any.
	Err error
}

// PenaltyEvent describes one Penalize.
type PenaltyEvent struct {
	// Dimension is the penalized dimension.
	Dimension string
	// Factor is the factor applied.
	Factor float64
	// Before and After are the balances in millitokens.
	Before, After int64
	// Err is the error Penalize returned, if any.
	Err error
}

// CooldownEvent describes one Cooldown.
type CooldownEvent struct {
	// Dimension is the cooled dimension.
	Dimension string
	// Until is the cooldown's end (a later running end when there was
	// one); zero when Err is set.
	Until time.Time
	// Before and After are the balances in millitokens.
	Before, After int64
	// Err is the error Cooldown returned, if any.
	Err error
}

// SyncEvent describes one Sync.
type SyncEvent struct {
	// Dimension is the synced dimension.
	Dimension string
	// Remaining is what the vendor reported, in tokens.
	Remaining int64
	// Before and After are the balances in millitokens; After is below
	// Before when the vendor reported less than the bucket held.
	Before, After int64
	// Err is the error Sync returned, if any.
	Err error
}

// ReleaseEvent describes one release of a lease.
type ReleaseEvent struct {
	// Lease is the lease's id.
	Lease string
	// Held is how long the lease was held.
	Held time.Duration
	// Recorded reports whether the lease had a record in the store. The
	// release of a lease without one (requests and tokens dimensions only,
	// without WithRecord) makes no store call and is always healthy.
	Recorded bool
	// Released reports that the store found and deleted the record; false
	// for a lease without one, and when the record was gone: the
	// reconciler had reclaimed it after it expired, or the store lost it
	// (then Err matches ErrLeaseExpired for Lease.Release).
	Released bool
	// Err is the error the release returned, if any.
	Err error
}

// LeaseLostEvent describes a lease a SlotHandle gave up.
type LeaseLostEvent struct {
	// Lease is the lease's id.
	Lease string
	// Cause is why: ErrLeaseExpired, ErrUnknownLease, or the last renewal
	// error when renewals failed until the loss margin.
	Cause error
}

// ReconcileEvent describes one reconcile batch.
type ReconcileEvent struct {
	// Restored counts expired leases processed, Reclaimed the concurrent
	// ones whose slots went back, AlreadyCapped those the capacity guard
	// limited, Orphans those whose bucket was gone.
	Restored, Reclaimed, AlreadyCapped, Orphans int
	// Duration is how long the batch took.
	Duration time.Duration
	// Err is the error the batch returned, if any.
	Err error
}

// StoreErrorKind classifies a failed store call.
type StoreErrorKind uint8

// The kinds of store errors.
const (
	// KindUnavailable: the store could not be reached or did not answer
	// in time (ErrUnavailable).
	KindUnavailable StoreErrorKind = iota + 1
	// KindContention: an optimistic store lost a race too many times.
	KindContention
	// KindClosed: the store was closed.
	KindClosed
	// KindInvalid: the request or the configuration was wrong (a
	// validation, unknown dimension, cost or configuration error).
	KindInvalid
	// KindOther: anything else.
	KindOther
)

// String returns the kind in snake_case: "unavailable", "contention",
// "closed", "invalid" or "other".
func (k StoreErrorKind) String() string {
	switch k {
	case KindUnavailable:
		return "unavailable"
	case KindContention:
		return "contention"
	case KindClosed:
		return "closed"
	case KindInvalid:
		return "invalid"
	}
	return "other"
}

// StoreErrorEvent describes a failed store call.
type StoreErrorEvent struct {
	// Op names the store operation: "acquire", "release", "extend",
	// "adjust", "penalize", "cooldown", "sync", "peek", "list_buckets", "leases",
	// "put_bucket", "delete_bucket" or "reconcile".
	Op string
	// Kind classifies Err.
	Kind StoreErrorKind
	// Err is the error.
	Err error
}

// Observers returns an Observer that calls each of obs in order; nil
// entries are skipped.
func Observers(obs ...*Observer) *Observer {
	var live []*Observer
	for _, o := range obs {
		if o != nil {
			live = append(live, o)
		}
	}
	switch len(live) {
	case 0:
		return &Observer{}
	case 1:
		return live[0]
	}
	all := &Observer{}
	all.Acquired = fanOut(live, func(o *Observer) func(context.Context, AcquireEvent) { return o.Acquired })
	all.Waited = fanOut(live, func(o *Observer) func(context.Context, WaitEvent) { return o.Waited })
	all.Settled = fanOut(live, func(o *Observer) func(context.Context, SettleEvent) { return o.Settled })
	all.Penalized = fanOut(live, func(o *Observer) func(context.Context, PenaltyEvent) { return o.Penalized })
	all.Cooled = fanOut(live, func(o *Observer) func(context.Context, CooldownEvent) { return o.Cooled })
	all.Synced = fanOut(live, func(o *Observer) func(context.Context, SyncEvent) { return o.Synced })
	all.Released = fanOut(live, func(o *Observer) func(context.Context, ReleaseEvent) { return o.Released })
	all.LeaseLost = fanOut(live, func(o *Observer) func(context.Context, LeaseLostEvent) { return o.LeaseLost })
	all.Reconciled = fanOut(live, func(o *Observer) func(context.Context, ReconcileEvent) { return o.Reconciled })
	all.StoreError = fanOut(live, func(o *Observer) func(context.Context, StoreErrorEvent) { return o.StoreError })
	all.Recreated = fanOut(live, func(o *Observer) func(context.Context, RecreateEvent) { return o.Recreated })
	return all
}

// fanOut combines one hook of several observers; nil when none sets it.
func fanOut[E any](obs []*Observer, hook func(*Observer) func(context.Context, E)) func(context.Context, E) {
	var fs []func(context.Context, E)
	for _, o := range obs {
		if f := hook(o); f != nil {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return nil
	}
	return func(ctx context.Context, e E) {
		for _, f := range fs {
			f(ctx, e)
		}
	}
}
