// Package label turns the events of a sluice.Observer into the bounded label
// values the observability adapters share, so that Prometheus and
// OpenTelemetry report the same names, and caps the number of distinct
// dimensions an adapter tracks.
package label

import (
	"errors"
	"sync"
	"time"

	"github.com/ontopix/sluice"
)

// The acquisition outcomes.
const (
	Granted  = "granted"
	RetryIn  = "retry_in"
	Degraded = "degraded"
	Error    = "error"
)

// Outcomes lists the acquisition outcomes, indexed as Acquire numbers them.
var Outcomes = [...]string{Granted, RetryIn, Degraded, Error}

// Acquire returns the index in Outcomes of an acquisition's outcome.
func Acquire(e *sluice.AcquireEvent) int {
	switch {
	case e.Err != nil:
		return 3
	case e.Degraded:
		return 2
	case e.Outcome == sluice.Granted:
		return 0
	case e.Outcome == sluice.RetryIn:
		return 1
	}
	return 3
}

// WaitResults lists the results of a wait, indexed as Wait numbers them.
var WaitResults = [...]string{Granted, "timeout", Error}

// Wait returns the index in WaitResults of a wait's result.
func Wait(e *sluice.WaitEvent) int {
	switch {
	case e.Granted:
		return 0
	case e.TimedOut:
		return 1
	}
	return 2
}

// SettleResults lists the results of a settlement, indexed as Settle
// numbers them: "ok", "late" (a charge after the lease expired) or "error".
var SettleResults = [...]string{"ok", "late", Error}

// Settle returns the index in SettleResults of a settlement's result.
func Settle(e *sluice.SettleEvent) int {
	switch {
	case e.Err != nil:
		return 2
	case e.Late:
		return 1
	}
	return 0
}

// Clamped reports a successful settlement whose change to the balance
// differs from the difference between actual and estimate: the debt floor
// or the capacity limited it.
func Clamped(e *sluice.SettleEvent) bool {
	return e.Err == nil && e.Applied != (e.Actual-e.Estimate)*1000
}

// PenaltyResults lists the results of a Penalize, indexed as Penalty
// numbers them.
var PenaltyResults = [...]string{"ok", Error}

// Penalty returns the index in PenaltyResults of a Penalize's result.
func Penalty(e *sluice.PenaltyEvent) int {
	if e.Err != nil {
		return 1
	}
	return 0
}

// CooldownResults lists the results of a Cooldown, indexed as Cooldown
// numbers them.
var CooldownResults = [...]string{"ok", Error}

// Cooldown returns the index in CooldownResults of a Cooldown's result.
func Cooldown(e *sluice.CooldownEvent) int {
	if e.Err != nil {
		return 1
	}
	return 0
}

// SyncResults lists the results of a Sync, indexed as Sync numbers them:
// "lowered" (the vendor reported less than the bucket held), "unchanged"
// or "error".
var SyncResults = [...]string{"lowered", "unchanged", Error}

// Sync returns the index in SyncResults of a Sync's result.
func Sync(e *sluice.SyncEvent) int {
	switch {
	case e.Err != nil:
		return 2
	case e.After < e.Before:
		return 0
	}
	return 1
}

// ReleaseResults lists the results of a release, indexed as Release numbers
// them: "released" (the store deleted the lease's record), "unrecorded" (the
// lease had no record, so nothing was asked of the store: the usual release
// of requests and tokens leases), "expired" (the record was gone: the
// reconciler had reclaimed it after its TTL, or the store lost it) or
// "error".
var ReleaseResults = [...]string{"released", "unrecorded", "expired", Error}

// Release returns the index in ReleaseResults of a release's result.
func Release(e *sluice.ReleaseEvent) int {
	switch {
	case errors.Is(e.Err, sluice.ErrLeaseExpired):
		return 2
	case e.Err != nil:
		return 3
	case !e.Recorded:
		return 1
	case e.Released:
		return 0
	}
	return 2
}

// LostCauses lists why a SlotHandle gave a lease up, indexed as LeaseLost
// numbers them: "expired" (ErrLeaseExpired), "unknown_lease"
// (ErrUnknownLease), "unavailable" (renewals failed with ErrUnavailable) or
// "other".
var LostCauses = [...]string{"expired", "unknown_lease", "unavailable", "other"}

// LeaseLost returns the index in LostCauses of a lost lease's cause.
func LeaseLost(e *sluice.LeaseLostEvent) int {
	switch {
	case errors.Is(e.Cause, sluice.ErrLeaseExpired):
		return 0
	case errors.Is(e.Cause, sluice.ErrUnknownLease):
		return 1
	case errors.Is(e.Cause, sluice.ErrUnavailable):
		return 2
	}
	return 3
}

// ReconcileResults lists what became of the expired leases a reconcile
// batch processed; the four are disjoint and add up to
// ReconcileEvent.Restored: "reclaimed" (a concurrent lease whose slots went
// back), "already_capped" (one whose return the capacity guard limited),
// "cleaned" (a requests or tokens lease whose record was deleted; its cost
// stays consumed) and "orphan" (a record whose bucket was gone).
var ReconcileResults = [...]string{"reclaimed", "already_capped", "cleaned", "orphan"}

// Reconcile splits a batch's count of processed leases as ReconcileResults
// names them.
func Reconcile(e *sluice.ReconcileEvent) [4]int {
	capped := e.AlreadyCapped
	reclaimed := e.Reclaimed - capped
	cleaned := e.Restored - e.Reclaimed - e.Orphans
	return [4]int{max(reclaimed, 0), max(capped, 0), max(cleaned, 0), max(e.Orphans, 0)}
}

// RunResults lists the results of a reconcile batch.
var RunResults = [...]string{"ok", Error}

// Run returns the index in RunResults of a reconcile batch's result.
func Run(err error) int {
	if err != nil {
		return 1
	}
	return 0
}

// OtherOp stands for a store operation this package does not know.
const OtherOp = "other"

// ops are the store operations an Observer reports errors for.
var ops = map[string]bool{
	"acquire": true, "release": true, "extend": true, "adjust": true,
	"penalize": true, "cooldown": true, "sync": true, "peek": true, "list_buckets": true, "leases": true,
	"put_bucket": true, "delete_bucket": true, "reconcile": true,
}

// Op returns op when it is a known store operation and OtherOp otherwise,
// so that the op label stays bounded.
func Op(op string) string {
	if ops[op] {
		return op
	}
	return OtherOp
}

// OtherDimension stands for every dimension beyond an adapter's cap.
const OtherDimension = "_other"

// DefaultMaxDimensions is how many distinct dimensions an adapter labels
// by name unless told otherwise.
const DefaultMaxDimensions = 100

// Dimensions caches what an adapter builds per dimension (its metric
// series or attribute sets), for at most a fixed number of distinct
// names; the others share the entry built for OtherDimension. It is safe
// for concurrent use, and a hit costs one sync.Map load.
type Dimensions[T any] struct {
	build func(dim string) T
	max   int
	m     sync.Map // string -> T

	mu    sync.Mutex
	n     int
	other T
	built bool
}

// NewDimensions returns a cache of at most max named dimensions whose
// entries build makes.
func NewDimensions[T any](max int, build func(dim string) T) *Dimensions[T] {
	return &Dimensions[T]{build: build, max: max}
}

// Get returns the entry of dim, building it on first use.
func (d *Dimensions[T]) Get(dim string) T {
	if v, ok := d.m.Load(dim); ok {
		return v.(T)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.m.Load(dim); ok {
		return v.(T)
	}
	if d.n >= d.max {
		if !d.built {
			d.other, d.built = d.build(OtherDimension), true
		}
		return d.other
	}
	v := d.build(dim)
	d.m.Store(dim, v)
	d.n++
	return v
}

// DimensionWait returns the wait to record for dimension i of a RetryIn
// acquisition: its own wait when the event carries per-dimension results
// (ok false for a dimension that was not short), else the acquisition's.
func DimensionWait(e *sluice.AcquireEvent, i int) (time.Duration, bool) {
	if len(e.Results) != len(e.Dimensions) {
		return e.RetryIn, true
	}
	w := e.Results[i].RetryIn
	return w, w > 0
}
