package fleetsim

import (
	"context"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/testing/fleetcheck"
)

// Member is one process of the fleet: a sluice.Client with its own clock
// and, on a networked store, its own proxy.
type Member struct {
	*sluice.Client
	Clock *Clock
	Proxy *Proxy // nil on the memory store
	rec   *Recorder
}

// validInterval returns the reference interval in which a lease became
// valid: from the instant the member's clock read the lease's valid
// instant (its CreatedAt), clamped to the call [invoked, now], to now.
// Lo is rounded down and hi up to the millisecond, so that rounding never
// narrows the interval.
func (m *Member) validInterval(invoked int64, l *sluice.Lease, now time.Time) (lo, hi int64) {
	hi = m.rec.ceil(now)
	lo = m.rec.Since(now.Add(-m.Clock.Now().Sub(l.CreatedAt())))
	return min(max(lo, invoked), hi), hi
}

// Granted records l's dimensions as admitted, each at cost[dim] when given
// (the vendor's actual usage, when below the estimate) or its lease cost,
// and held from now (see Recorder.Held).
func (m *Member) Granted(invoked int64, l *sluice.Lease, actual map[string]int64) {
	now := time.Now()
	lo, hi := m.validInterval(invoked, l, now)
	for _, d := range l.Dimensions() {
		cost := d.Cost
		if a, ok := actual[d.Dimension]; ok {
			cost = a
		}
		m.rec.Add(d.Dimension, fleetcheck.Event{Kind: fleetcheck.Grant, Lo: lo, Hi: hi, Cost: cost, Lease: l.ID()})
		m.rec.Held(d.Dimension, l.ID(), cost, now, false)
	}
}

// Ended records the end of l's holds at at, the instant its holder
// stopped using it.
func (m *Member) Ended(at time.Time, l *sluice.Lease) {
	ms := m.rec.Since(at)
	for _, d := range l.Dimensions() {
		m.rec.Add(d.Dimension, fleetcheck.Event{Kind: fleetcheck.Release, Lo: ms, Hi: ms, Lease: l.ID()})
		m.rec.Held(d.Dimension, l.ID(), 0, at, true)
	}
}

// Wait waits for reqs and records the grant (time-based dimensions only
// count; concurrent ones are recorded as holds that the caller ends).
// The wait ends at ctx's deadline (see sluice.Client.Wait).
func (m *Member) Wait(ctx context.Context, reqs []sluice.Request) (*sluice.Lease, error) {
	invoked := m.rec.Now()
	l, err := m.Client.Wait(ctx, reqs, sluice.WithRecord())
	if err != nil {
		return nil, err
	}
	m.Granted(invoked, l, nil)
	return l, nil
}

// Acquire acquires cost on dim and records a grant.
func (m *Member) Acquire(ctx context.Context, dim string, cost int64) (bool, error) {
	invoked := m.rec.Now()
	res, err := m.Client.Acquire(ctx, dim, sluice.WithCost(cost))
	if err != nil || res.Outcome != sluice.Granted {
		return false, err
	}
	m.Granted(invoked, res.Lease, nil)
	return true, nil
}

// Adjust settles delta on l's dim and records a positive delta as a charge
// over the call; a refund is recorded by the caller in the grant's cost.
func (m *Member) Adjust(ctx context.Context, l *sluice.Lease, dim string, delta int64) error {
	invoked := m.rec.Now()
	_, err := l.Adjust(ctx, dim, delta)
	if delta > 0 {
		// Charged even when the reply was lost: the store may have acted.
		m.rec.Add(dim, fleetcheck.Event{Kind: fleetcheck.Charge, Lo: invoked, Hi: m.rec.Latest(), Cost: delta})
	}
	return err
}
