package memstore

import (
	"context"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
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

	next, costs := &sc.next, &sc.costs
	record := req.Record
	for i, e := range es {
		if e.deleted {
			return &store.ConfigurationError{Dimension: e.b.Name}
		}
		c, err := e.b.ResolveCost(req.Items[i])
		if err != nil {
			return err
		}
		costs[i] = c
		if e.b.Type == bucket.Concurrent {
			record = true
		}
	}
	if cap(res.Items) >= n {
		res.Items = res.Items[:n]
	} else {
		res.Items = make([]store.ItemResult, n)
	}
	poll := req.Poll
	if l := s.leaseByID(req.ID); l != nil {
		return s.replay(req, res, l, es, costs[:n], now)
	}
	ats := &sc.ats
	if refuseBehind(es, costs[:n], now, ats[:n], &sc.waits, res.Items) {
		res.Granted, res.Recorded, res.Ahead, res.ExpiresAt = false, false, 0, time.Time{}
		res.RetryIn, res.Behind = 0, 0
		for i, e := range es {
			res.RetryIn = max(res.RetryIn, res.Items[i].RetryIn)
			if res.Items[i].RetryIn > 0 {
				res.Behind = max(res.Behind, time.Duration(e.st.Last-now)*time.Millisecond)
			}
		}
		return nil
	}
	res.Behind = 0
	granted := true
	var retry int64
	aligned, ahead, aheadCost := &sc.aligned, &sc.ahead, &sc.aheadCost
	queueAhead(es, req.ID, now, ahead[:n], aheadCost[:n])
	for i, e := range es {
		aligned[i] = e.st
		st, wait, ok := bucket.Take(e.lim, aligned[i], ats[i], costs[i]*bucket.Milli)
		// The tickets ahead keep their costs: the balance must cover them
		// too.
		ok = ok && (aheadCost[i] == 0 || bucket.Available(e.lim, aligned[i], ats[i]) >= (costs[i]+aheadCost[i])*bucket.Milli)
		next[i] = st
		ir := &res.Items[i]
		*ir = store.ItemResult{Dimension: e.b.Name, Type: e.b.Type, Cost: costs[i], Capacity: e.b.Capacity}
		if ok {
			ir.Remaining = st.Tokens
			continue
		}
		granted = false
		if e.lim.Type == bucket.Concurrent {
			wait = bucket.ConcurrentRetry(now, e.earliestExpiry(), poll.Milliseconds())
		}
		ir.Remaining = bucket.Available(e.lim, aligned[i], ats[i])
		ir.RetryIn = time.Duration(wait) * time.Millisecond
		retry = max(retry, wait)
	}
	res.Granted, res.Recorded = granted, false
	res.RetryIn, res.ExpiresAt = 0, time.Time{}
	if !granted {
		res.RetryIn = time.Duration(retry) * time.Millisecond
		for i, e := range es {
			if res.Items[i].RetryIn == 0 { // granted-looking items report what they have now
				res.Items[i].Remaining = bucket.Available(e.lim, aligned[i], ats[i])
			}
		}
		res.Ahead = enqueue(es, req.ID, ahead[:n], costs[:n], now, req.Queue.Milliseconds())
		return nil
	}
	res.Ahead = 0
	expires := now + req.TTL.Milliseconds()
	if record {
		l := &lease{id: req.ID, caller: req.Caller, created: now}
		if n <= len(l.buf) {
			l.items, l.ents = l.buf[:n], l.entBuf[:n]
		} else {
			l.items, l.ents = make([]store.Item, n), make([]*entry, n)
		}
		copy(l.ents, es)
		l.expires.Store(expires)
		for i, e := range es {
			l.items[i] = store.Item{Dimension: e.b.Name, Cost: costs[i]}
		}
		sh := s.shard(req.ID)
		sh.mu.Lock()
		if dup := sh.m[req.ID]; dup != nil { // a concurrent acquisition with the same id won
			sh.mu.Unlock()
			return s.replay(req, res, dup, es, costs[:n], now)
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
	}
	dequeueAll(es, req.ID)
	res.ExpiresAt = time.UnixMilli(expires)
	return nil
}

// refuseBehind aligns now with every bucket of es, filling ats with the
// decision times (see bucket.Align); waits is its scratch space. When now
// is more than the maximum skew behind a time-based bucket's refill
// timestamp, it fills items with the refusal (each such item's wait is
// bucket.SkewRetry, every other item's 0) and reports true: the admission
// is refused and nothing changes. The caller holds the locks of es.
func refuseBehind(es []*entry, costs []int64, now int64, ats []int64, waits *[store.MaxItems]int64, items []store.ItemResult) bool {
	refused := false
	for i, e := range es {
		ats[i], waits[i] = bucket.Align(e.lim, e.st, now, skewMs)
		refused = refused || waits[i] > 0
	}
	if !refused {
		return false
	}
	for i, e := range es {
		var w int64
		if waits[i] > 0 {
			w = bucket.SkewRetry(e.lim, e.st, ats[i], waits[i], costs[i]*bucket.Milli)
		}
		items[i] = store.ItemResult{Dimension: e.b.Name, Type: e.b.Type, Cost: costs[i], Capacity: e.b.Capacity,
			Remaining: bucket.Available(e.lim, e.st, ats[i]), RetryIn: time.Duration(w) * time.Millisecond}
	}
	return true
}
