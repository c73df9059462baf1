package history

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ontopix/sluice"
)

// Observer returns the observer to give the Client (sluice.WithObserver,
// or combined with others by sluice.Observers). It records acquisitions,
// waits and settlements per (dimension, caller), and keeps cooldowns,
// syncs that lowered a balance, reconciles that restored leases, store
// errors, penalties, lost leases and re-created buckets as Events. Its
// callbacks are fast: one mutex, no I/O.
func (r *Recorder) Observer() *sluice.Observer {
	return &sluice.Observer{
		Acquired:   r.acquired,
		Waited:     r.waited,
		Settled:    r.settled,
		Penalized:  r.penalized,
		Cooled:     r.cooled,
		Synced:     r.synced,
		LeaseLost:  r.leaseLost,
		Reconciled: r.reconciled,
		StoreError: r.storeError,
		Recreated:  r.recreated,
	}
}

// now returns the Recorder's time: its clock's, else the wall clock's.
func (r *Recorder) now() time.Time {
	if r.clock != nil {
		return r.clock()
	}
	return time.Now()
}

// second returns the Recorder's time in Unix seconds, for an event. With
// no clock given it reads the monotonic clock only, from the wall time
// read at most 10 s before: half the cost of time.Now, and as far from the
// wall clock as the wall clock was moved in those seconds. r.mu is held.
//
// It never goes back, even when the wall clock is set back: events and
// flushes (collect) are dated by it, so that an event is never dated in a
// period a flush has already closed.
func (r *Recorder) second() int64 {
	var sec int64
	if r.clock != nil {
		sec = r.clock().Unix()
	} else {
		d := time.Since(r.anchor)
		if d > reanchorEvery || d < 0 {
			r.anchor, d = time.Now(), 0
		}
		sec = r.anchor.Add(d).Unix()
	}
	r.latest = max(r.latest, sec)
	return r.latest
}

// reanchorEvery is how often second reads the wall clock again.
const reanchorEvery = 10 * time.Second

func (r *Recorder) acquired(_ context.Context, e sluice.AcquireEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	now := r.second()
	for i, d := range e.Dimensions {
		var res *sluice.DimensionResult
		if i < len(e.Results) {
			res = &e.Results[i]
		}
		if e.Outcome == sluice.RetryIn && res != nil && res.RetryIn == 0 {
			continue // not short: the refusal is another dimension's
		}
		cost := d.Cost
		if res != nil {
			cost = res.Cost
		}
		for _, t := range r.tallies(r.lookup(d.Dimension, e.Caller), now) {
			if t == nil {
				continue
			}
			switch {
			case e.Err != nil:
				t.n[cErrors]++
			case e.Outcome == sluice.Granted:
				t.n[cGrants]++
				t.n[cReserved] += cost
				if e.Degraded {
					t.n[cDegraded]++
				}
			case e.Outcome == sluice.RetryIn:
				t.n[cRefusals]++
			}
		}
	}
}

func (r *Recorder) waited(_ context.Context, e sluice.WaitEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	now := r.second()
	for _, d := range e.Dimensions {
		for _, t := range r.tallies(r.lookup(d.Dimension, e.Caller), now) {
			if t != nil {
				t.wait(e.Waited)
			}
		}
	}
}

func (r *Recorder) settled(_ context.Context, e sluice.SettleEvent) {
	if e.Err != nil {
		return // nothing settled; the store error is reported apart
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	now := r.second()
	for _, t := range r.tallies(r.lookup(e.Dimension, e.Caller), now) {
		if t != nil {
			t.n[cSettled] += e.Actual
			if e.Actual > e.Estimate {
				t.n[cDebt] += e.Actual - e.Estimate
			}
		}
	}
}

func (r *Recorder) penalized(_ context.Context, e sluice.PenaltyEvent) {
	if e.Err == nil {
		r.event(EventPenalty, e.Dimension, fmt.Sprintf("factor %g: balance %s → %s tokens", e.Factor, sluice.Millitokens(e.Before), sluice.Millitokens(e.After)))
	}
}

func (r *Recorder) cooled(_ context.Context, e sluice.CooldownEvent) {
	if e.Err == nil {
		r.event(EventCooldown, e.Dimension, "until "+e.Until.UTC().Format(time.RFC3339Nano))
	}
}

// synced keeps the syncs that lowered the balance: the others (the
// vendor reported as much as Sluice believed, or more) are routine.
func (r *Recorder) synced(_ context.Context, e sluice.SyncEvent) {
	if e.Err == nil && e.After < e.Before {
		r.event(EventSync, e.Dimension, fmt.Sprintf("vendor reported %d remaining: balance %s → %s tokens", e.Remaining, sluice.Millitokens(e.Before), sluice.Millitokens(e.After)))
	}
}

func (r *Recorder) leaseLost(_ context.Context, e sluice.LeaseLostEvent) {
	r.event(EventLeaseLost, "", fmt.Sprintf("lease %s: %v", e.Lease, e.Cause))
}

// reconciled keeps the batches that restored something or failed.
func (r *Recorder) reconciled(_ context.Context, e sluice.ReconcileEvent) {
	switch {
	case e.Err != nil:
		r.event(EventReconcile, "", "failed: "+e.Err.Error())
	case e.Restored > 0:
		r.event(EventReconcile, "", fmt.Sprintf("%d expired leases restored (%d slots reclaimed, %d capped, %d orphans)", e.Restored, e.Reclaimed, e.AlreadyCapped, e.Orphans))
	}
}

func (r *Recorder) storeError(_ context.Context, e sluice.StoreErrorEvent) {
	detail := e.Op + ": " + e.Kind.String()
	if e.Err != nil && !errors.Is(e.Err, context.Canceled) {
		detail += ": " + e.Err.Error()
	}
	r.event(EventStoreError, "", detail)
}

func (r *Recorder) recreated(_ context.Context, e sluice.RecreateEvent) {
	r.event(EventRecreated, e.Dimension, "re-created after the store lost it (found by "+e.Op+")")
}
