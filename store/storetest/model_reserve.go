package storetest

import (
	"slices"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// id returns the lease id of label, as the runner forms it.
func (m *model) id(label string) store.LeaseID { return idFor(m.prefix + label) }

// place returns the queue place of a request with id: the At of a live
// ticket it holds in any of bs's queues (the earliest), else now.
func place(bs []*mBucket, id store.LeaseID, now int64) int64 {
	at, found := now, false
	for _, b := range bs {
		for _, t := range b.queue {
			if t.ID == id && t.Expires > now && (!found || t.At < at) {
				at, found = t.At, true
			}
		}
	}
	return at
}

// ahead purges the dead tickets of bs's concurrent queues and returns,
// per item, the number and the total cost of the live tickets of others
// ahead of the request's place.
func (m *model) ahead(bs []*mBucket, id store.LeaseID, now int64) ([]int, []int64) {
	out, cost := make([]int, len(bs)), make([]int64, len(bs))
	for _, b := range bs {
		if b.b.Type == bucket.Concurrent {
			b.queue = slices.DeleteFunc(b.queue, func(t store.Ticket) bool { return t.Expires <= now })
		}
	}
	me := store.Ticket{ID: id, At: place(bs, id, now)}
	for i, b := range bs {
		for _, t := range b.queue {
			if t.ID != id && t.Before(me) {
				out[i]++
				cost[i] += t.Cost
			}
		}
	}
	return out, cost
}

// enqueue takes or renews the request's tickets, of costs, after a denial
// when it asked to queue, and returns the largest number of tickets ahead.
func (m *model) enqueue(bs []*mBucket, id store.LeaseID, ahead []int, costs []int64, now, queueMs int64) int {
	n, conc := 0, false
	for i, b := range bs {
		if b.b.Type == bucket.Concurrent {
			n, conc = max(n, ahead[i]), true
		}
	}
	if queueMs == 0 || !conc {
		return n
	}
	at := place(bs, id, now)
	for i, b := range bs {
		if b.b.Type != bucket.Concurrent {
			continue
		}
		if k := slices.IndexFunc(b.queue, func(t store.Ticket) bool { return t.ID == id }); k >= 0 {
			b.queue[k].Expires, b.queue[k].Cost = now+queueMs, costs[i]
			continue
		}
		b.queue = append(b.queue, store.Ticket{ID: id, At: at, Expires: now + queueMs, Cost: costs[i]})
	}
	return n
}

// dequeueAll removes id's tickets from bs's queues.
func (m *model) dequeueAll(bs []*mBucket, id store.LeaseID) {
	for _, b := range bs {
		b.queue = slices.DeleteFunc(b.queue, func(t store.Ticket) bool { return t.ID == id })
	}
}

func (m *model) dequeue(st Step, now int64) Expect {
	req := store.DequeueRequest{Now: time.UnixMilli(now), ID: m.id(st.Lease), Dimensions: st.Dimensions}
	if err := contract.Dequeue(req); err != nil {
		return fail(err)
	}
	for _, d := range st.Dimensions {
		if b := m.buckets[d]; b != nil && b.b.Type == bucket.Concurrent {
			b.queue = slices.DeleteFunc(b.queue, func(t store.Ticket) bool { return t.Expires <= now || t.ID == req.ID })
		}
	}
	return Expect{}
}

// reserve applies a "reserve" step (see store.Store.Reserve).
func (m *model) reserve(st Step, now int64) Expect {
	req := &store.ReserveRequest{Now: time.UnixMilli(now), ID: m.id(st.Lease), TTL: time.Duration(st.TTLMs) * time.Millisecond,
		MaxWait: time.Duration(st.MaxWaitMs) * time.Millisecond, Record: st.Record}
	for _, it := range st.Items {
		req.Items = append(req.Items, store.Item{Dimension: it.Dimension, Cost: it.Cost})
	}
	if err := contract.Reserve(req); err != nil {
		return fail(err)
	}
	bs := make([]*mBucket, len(req.Items))
	resolved := make([]store.Item, len(req.Items))
	for i, it := range req.Items {
		if bs[i] = m.buckets[it.Dimension]; bs[i] == nil {
			return fail(unknownDimension(it.Dimension))
		}
	}
	for i, it := range req.Items {
		if err := bs[i].b.CheckReservable(); err != nil {
			return fail(err)
		}
		c, err := bs[i].b.ResolveCost(it)
		if err != nil {
			return fail(err)
		}
		resolved[i] = store.Item{Dimension: it.Dimension, Cost: c}
	}
	if old := m.leases[st.Lease]; old != nil && old.record {
		if !store.SameItems(old.items, resolved) {
			return fail(store.LeaseInUse(req.ID))
		}
		m.replayed = true
		e := m.retriedReserve(old, bs, resolved, now)
		e.ValidAtMs = max(old.validAt, old.created) - m.base
		e.WaitMs = max(old.validAt-now, 0)
		return e
	}
	if e, refused := m.refuseBehind(bs, resolved, now); refused {
		e.WaitMs, e.RetryInMs = e.RetryInMs, 0
		return e
	}
	states := make([]bucket.State, len(bs))
	ats := make([]int64, len(bs))
	valid, tooLong := now, false
	e := Expect{}
	for i, b := range bs {
		states[i], ats[i] = m.aligned(b, now)
		w := bucket.RetryIn(b.lim, states[i], ats[i], resolved[i].Cost*bucket.Milli)
		tooLong = tooLong || w > st.MaxWaitMs
		valid = max(valid, ats[i]+w)
		e.Items = append(e.Items, ItemExpect{Dimension: b.b.Name, Cost: resolved[i].Cost,
			Remaining: bucket.Available(b.lim, states[i], ats[i]), RetryInMs: w})
	}
	e.WaitMs = valid - now
	next := make([]bucket.State, len(bs))
	if !tooLong {
		var bound int64
		for i, b := range bs {
			var ok bool
			if next[i], ok = bucket.Reserve(b.lim, states[i], ats[i], resolved[i].Cost*bucket.Milli, valid); !ok {
				bound = max(bound, bucket.ReserveBound(b.lim, states[i], ats[i], resolved[i].Cost*bucket.Milli))
			}
		}
		if bound > 0 {
			tooLong, e.WaitMs = true, bound
		}
	}
	if tooLong {
		return e
	}
	record := st.Record || m.always
	l := &mLease{record: record, recorded: record, created: now, validAt: valid, expires: valid + st.TTLMs}
	for i, b := range bs {
		b.st = next[i]
		e.Items[i].Remaining = next[i].Tokens
		c := next[i].Charged
		e.Items[i].Charged = &c
		l.items = append(l.items, resolved[i])
		l.incs = append(l.incs, b.inc)
	}
	m.leases[st.Lease] = l
	e.Granted, e.Recorded = true, record
	e.ValidAtMs, e.ExpiresAtMs = valid-m.base, l.expires-m.base
	return e
}

// cancel applies a "cancel" step (see store.Store.Cancel), as a client
// that passes what it knows of the reservation.
func (m *model) cancel(st Step, now int64) Expect {
	l := m.leases[st.Lease]
	req := store.CancelRequest{Now: time.UnixMilli(now), ID: m.id(st.Lease), Recorded: l == nil || l.recorded}
	if !req.Recorded && l.validAt != 0 && !l.cancelled {
		req.Items, req.ValidAt = l.items, time.UnixMilli(l.validAt)
	}
	if err := contract.Cancel(req); err != nil {
		return fail(err)
	}
	var e Expect
	if req.Recorded {
		if l == nil || !l.record {
			return e
		}
		if l.validAt == 0 {
			return fail(store.NotReservation(req.ID))
		}
		l.record = false
		e.Cancelled = true
	} else {
		l.cancelled = true
		e.Cancelled = now < l.validAt
	}
	for i, it := range l.items {
		b := m.buckets[it.Dimension]
		if req.Recorded {
			if lb, ok := m.live(l, i); ok {
				b = lb
			} else {
				b = nil
			}
		}
		if b == nil || b.b.Type == bucket.Concurrent {
			continue
		}
		s, at := m.aligned(b, now)
		var back int64
		b.st, back = bucket.Unreserve(b.lim, s, at, it.Cost*bucket.Milli, l.validAt)
		if back > 0 {
			e.Returned = append(e.Returned, ReturnedExpect{it.Dimension, back})
		}
	}
	return e
}
