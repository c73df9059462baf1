package storetest

import (
	"time"

	"github.com/ontopix/sluice/store"
)

// reserve runs a "reserve" step.
func (r *runner) reserve(st Step, now time.Time) (Expect, error) {
	req := &store.ReserveRequest{Now: now, ID: idFor(r.prefix + st.Lease), Caller: "vectors",
		TTL: time.Duration(st.TTLMs) * time.Millisecond, Record: st.Record, MaxWait: time.Duration(st.MaxWaitMs) * time.Millisecond, Op: r.op()}
	for _, it := range st.Items {
		req.Items = append(req.Items, store.Item{Dimension: it.Dimension, Cost: it.Cost})
	}
	r.last = func() (Expect, error) { return r.sendReserve(st, req) }
	return r.last()
}

// sendReserve sends a reservation and records a grant's lease.
func (r *runner) sendReserve(st Step, req *store.ReserveRequest) (Expect, error) {
	var res store.ReserveResult
	if err := r.s.Reserve(r.ctx, req, &res); err != nil {
		return Expect{}, err
	}
	got := Expect{Granted: res.Granted, WaitMs: res.Wait.Milliseconds(), Recorded: res.Recorded,
		ValidAtMs: r.rel(res.ValidAt), ExpiresAtMs: r.rel(res.ExpiresAt)}
	for _, ir := range res.Items {
		ie := ItemExpect{Dimension: ir.Dimension, Cost: ir.Cost, Remaining: ir.Remaining, RetryInMs: ir.RetryIn.Milliseconds()}
		if res.Granted {
			ie.Charged = &ir.Charged
		}
		got.Items = append(got.Items, ie)
	}
	if res.Granted {
		l := &replayLease{id: req.ID, recorded: res.Recorded, expiresAt: res.ExpiresAt, validAt: res.ValidAt, held: map[string]int64{}}
		for _, ir := range res.Items {
			l.held[ir.Dimension] = ir.Cost
			l.items = append(l.items, store.Item{Dimension: ir.Dimension, Cost: ir.Cost})
		}
		r.leases[st.Lease] = l
	}
	return got, nil
}

// cancel runs a "cancel" step, as a client that knows what it reserved.
func (r *runner) cancel(st Step, now time.Time) (Expect, error) {
	l := r.lease(st.Lease)
	req := store.CancelRequest{Now: now, ID: l.id, Recorded: l.recorded, ValidAt: l.validAt, Op: r.op()}
	if !l.recorded {
		for _, it := range l.items { // at what the lease holds now
			req.Items = append(req.Items, store.Item{Dimension: it.Dimension, Cost: l.held[it.Dimension]})
		}
	}
	r.last = func() (Expect, error) { return r.sendCancel(l, req) }
	return r.last()
}

// sendCancel sends a cancellation; the client then forgets a reservation
// without a record.
func (r *runner) sendCancel(l *replayLease, req store.CancelRequest) (Expect, error) {
	cr, err := r.s.Cancel(r.ctx, req)
	if err != nil {
		return Expect{}, err
	}
	got := Expect{Cancelled: cr.Cancelled}
	for _, x := range cr.Returned {
		got.Returned = append(got.Returned, ReturnedExpect(x))
	}
	if !req.Recorded {
		// The client forgets a reservation it cancelled.
		l.items, l.validAt = nil, time.Time{}
	}
	return got, nil
}
