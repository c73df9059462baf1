package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Reserve implements store.Queuer.
func (s *Store) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	if err := s.check(); err != nil {
		return err
	}
	now := req.Now.UnixMilli()
	n := len(req.Items)
	sc := s.scratch()
	defer s.works.Put(sc)
	es := sc.es[:n]
	defer clear(es)
	if err := s.lockItems(req.Items, es, sc.order[:]); err != nil {
		return err
	}
	defer unlockAll(es)
	costs := &sc.costs
	for i, e := range es {
		if e.deleted {
			return &store.ConfigurationError{Dimension: e.b.Name}
		}
		if err := e.b.CheckReservable(); err != nil {
			return err
		}
		c, err := e.b.ResolveCost(req.Items[i])
		if err != nil {
			return err
		}
		costs[i] = c
	}
	if cap(res.Items) >= n {
		res.Items = res.Items[:n]
	} else {
		res.Items = make([]store.ItemResult, n)
	}
	*res = store.ReserveResult{Items: res.Items}
	if l := s.leaseByID(req.ID); l != nil {
		return s.replayReserve(req, res, l, es, costs[:n], now)
	}
	states, next, ats := &sc.aligned, &sc.next, &sc.ats
	if refuseBehind(es, costs[:n], now, ats[:n], &sc.waits, res.Items) {
		for i, e := range es {
			res.Wait = max(res.Wait, res.Items[i].RetryIn)
			if res.Items[i].RetryIn > 0 {
				res.Behind = max(res.Behind, time.Duration(e.st.Last-now)*time.Millisecond)
			}
		}
		return nil
	}
	valid, tooLong := now, false
	maxWait := req.MaxWait.Milliseconds()
	for i, e := range es {
		states[i] = e.st
		w := bucket.RetryIn(e.lim, states[i], ats[i], costs[i]*bucket.Milli)
		tooLong = tooLong || w > maxWait
		valid = max(valid, ats[i]+w)
		res.Items[i] = store.ItemResult{Dimension: e.b.Name, Type: e.b.Type, Cost: costs[i], Capacity: e.b.Capacity,
			Remaining: bucket.Available(e.lim, states[i], ats[i]), RetryIn: time.Duration(w) * time.Millisecond}
	}
	wait := valid - now
	if !tooLong {
		var bound int64
		for i, e := range es {
			var ok bool
			if next[i], ok = bucket.Reserve(e.lim, states[i], ats[i], costs[i]*bucket.Milli, valid); !ok {
				bound = max(bound, bucket.ReserveBound(e.lim, states[i], ats[i], costs[i]*bucket.Milli))
			}
		}
		if bound > 0 {
			tooLong, wait = true, bound
		}
	}
	res.Wait = time.Duration(wait) * time.Millisecond
	if tooLong {
		return nil
	}
	expires := valid + req.TTL.Milliseconds()
	if req.Record {
		l := &lease{id: req.ID, caller: req.Caller, created: now, validAt: valid,
			items: make([]store.Item, n), ents: slices.Clone(es)}
		l.expires.Store(expires)
		for i, e := range es {
			l.items[i] = store.Item{Dimension: e.b.Name, Cost: costs[i]}
		}
		sh := s.shard(req.ID)
		sh.mu.Lock()
		if dup := sh.m[req.ID]; dup != nil {
			sh.mu.Unlock()
			return s.replayReserve(req, res, dup, es, costs[:n], now)
		}
		sh.m[req.ID] = l
		sh.mu.Unlock()
		for _, e := range es {
			if e.leases == nil {
				e.leases = map[*lease]struct{}{}
			}
			e.leases[l] = struct{}{}
		}
		res.Recorded = true
	}
	for i, e := range es {
		e.st = next[i]
		res.Items[i].Remaining = next[i].Tokens
		res.Items[i].Charged = next[i].Charged
	}
	res.Granted = true
	res.ValidAt, res.ExpiresAt = time.UnixMilli(valid), time.UnixMilli(expires)
	return nil
}

// replayReserve answers a reservation whose id already has record l: the
// reservation it was when the request is the same, else ErrLeaseInUse.
// The caller holds the locks of es.
func (s *Store) replayReserve(req *store.ReserveRequest, res *store.ReserveResult, l *lease, es []*entry, costs []int64, now int64) error {
	var ar store.AcquireResult
	ar.Items = res.Items
	areq := &store.AcquireRequest{ID: req.ID}
	if err := s.replay(areq, &ar, l, es, costs, now); err != nil {
		return err
	}
	valid := max(l.validAt, l.created)
	res.Items = ar.Items
	for i, e := range es {
		// The counter now: settlements since the reservation was made
		// are not told apart from earlier ones on a resend.
		res.Items[i].Charged = e.st.Charged
	}
	res.Granted, res.Recorded = true, true
	res.ValidAt, res.ExpiresAt = time.UnixMilli(valid), ar.ExpiresAt
	res.Wait = time.Duration(max(l.validAt-now, 0)) * time.Millisecond
	return nil
}

// Cancel implements store.Queuer.
func (s *Store) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	if err := s.check(); err != nil {
		return store.CancelResult{}, err
	}
	now := req.Now.UnixMilli()
	if !req.Recorded {
		return s.cancelUnrecorded(req, now), nil
	}
	l := s.leaseByID(req.ID)
	if l == nil {
		return store.CancelResult{}, nil
	}
	var order [store.MaxItems]uint8
	es := l.ents
	lockSorted(es, order[:])
	defer unlockAll(es)
	sh := s.shard(l.id)
	sh.mu.Lock()
	if sh.m[l.id] != l {
		sh.mu.Unlock()
		return store.CancelResult{}, nil
	}
	if l.validAt == 0 {
		sh.mu.Unlock()
		return store.CancelResult{}, store.NotReservation(req.ID)
	}
	delete(sh.m, l.id)
	items := l.items
	sh.mu.Unlock()
	out := store.CancelResult{Cancelled: true}
	for k, e := range es {
		delete(e.leases, l)
		if e.deleted || e.b.Type == bucket.Concurrent {
			continue
		}
		if back := unreserve(e, now, items[k].Cost, l.validAt); back > 0 {
			out.Returned = append(out.Returned, store.Returned{Dimension: items[k].Dimension, Amount: back})
		}
	}
	return out, nil
}

// cancelUnrecorded gives back a reservation the caller describes.
func (s *Store) cancelUnrecorded(req store.CancelRequest, now int64) store.CancelResult {
	valid := req.ValidAt.UnixMilli()
	out := store.CancelResult{Cancelled: now < valid}
	for _, it := range req.Items {
		e := s.lookup(it.Dimension)
		if e == nil {
			continue
		}
		e.mu.Lock()
		if !e.deleted && e.b.Type != bucket.Concurrent {
			if back := unreserve(e, now, it.Cost, valid); back > 0 {
				out.Returned = append(out.Returned, store.Returned{Dimension: it.Dimension, Amount: back})
			}
		}
		e.mu.Unlock()
	}
	return out
}

// unreserve applies bucket.Unreserve to e at now; the caller holds e.mu.
func unreserve(e *entry, now, cost, valid int64) int64 {
	st := e.st
	at, _ := bucket.Align(e.lim, st, now, skewMs)
	var back int64
	e.st, back = bucket.Unreserve(e.lim, st, at, cost*bucket.Milli, valid)
	return back
}

// Dequeue implements store.Queuer.
func (s *Store) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	if err := s.check(); err != nil {
		return err
	}
	now := req.Now.UnixMilli()
	for _, d := range req.Dimensions {
		e := s.lookup(d)
		if e == nil {
			continue
		}
		e.mu.Lock()
		conc := !e.deleted && e.b.Type == bucket.Concurrent
		if conc {
			e.queue = slices.DeleteFunc(e.queue, func(t store.Ticket) bool { return t.Expires <= now || t.ID == req.ID })
		}
		e.mu.Unlock()
		if conc {
			s.notify(d)
		}
	}
	return nil
}
