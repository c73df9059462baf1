package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Adjust implements store.Store.
func (s *Store) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	if err := s.check(); err != nil {
		return store.Settlement{}, err
	}
	now := req.Now.UnixMilli()
	e := s.lookup(req.Dimension)
	if e == nil {
		return store.Settlement{}, &store.ConfigurationError{Dimension: req.Dimension}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deleted {
		return store.Settlement{}, &store.ConfigurationError{Dimension: req.Dimension}
	}
	if err := e.b.CheckAdjustable(); err != nil {
		return store.Settlement{}, err
	}
	held := req.Held
	var rec *store.Item
	if req.Recorded {
		sh := s.shard(req.ID)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		l := sh.m[req.ID]
		if l == nil {
			return store.Settlement{}, store.ErrUnknownLease
		}
		for i := range l.items {
			if l.items[i].Dimension == req.Dimension {
				rec = &l.items[i]
			}
		}
		if rec == nil {
			return store.Settlement{}, &bucket.FieldError{Field: "dimension", Value: req.Dimension, Reason: "is not part of lease " + req.ID.String()}
		}
		held = rec.Cost
		if req.Delta < 0 && l.expires.Load() <= now {
			return store.Settlement{}, store.ErrLeaseExpired
		}
	} else if req.Delta < 0 && !req.ExpiresAt.IsZero() && req.ExpiresAt.UnixMilli() <= now {
		return store.Settlement{}, store.ErrLeaseExpired
	}
	if _, err := store.AdjustHeld(req.Dimension, held, req.Delta); err != nil {
		return store.Settlement{}, err
	}
	st, at := bucket.Align(e.lim, e.st, now, skewMs)
	var applied int64
	e.st, applied = bucket.Adjust(e.lim, st, at, req.Delta*bucket.Milli)
	held = store.HeldAfter(held, req.Delta, applied)
	if rec != nil {
		rec.Cost = held
	}
	return store.Settlement{Held: held, Applied: applied, Remaining: e.st.Tokens}, nil
}

// Penalize implements store.Store.
func (s *Store) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	if err := s.check(); err != nil {
		return store.Penalty{}, err
	}
	now := req.Now.UnixMilli()
	e := s.lookup(req.Dimension)
	if e == nil {
		return store.Penalty{}, &store.ConfigurationError{Dimension: req.Dimension}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deleted {
		return store.Penalty{}, &store.ConfigurationError{Dimension: req.Dimension}
	}
	if err := e.b.CheckPenalizable(); err != nil {
		return store.Penalty{}, err
	}
	st, at := bucket.Align(e.lim, e.st, now, skewMs)
	before := bucket.Available(e.lim, st, at)
	e.st = bucket.Penalize(e.lim, st, at, req.FactorMilli)
	return store.Penalty{Before: before, After: e.st.Tokens}, nil
}

// Peek implements store.Store.
func (s *Store) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ms := req.Now.UnixMilli()
	out := make([]store.BucketState, 0, len(req.Dimensions))
	for _, d := range req.Dimensions {
		e := s.lookup(d)
		if e == nil {
			return nil, &store.ConfigurationError{Dimension: d}
		}
		e.mu.Lock()
		if e.deleted {
			e.mu.Unlock()
			return nil, &store.ConfigurationError{Dimension: d}
		}
		out = append(out, e.state(ms))
		e.mu.Unlock()
	}
	return out, nil
}

// state snapshots e at now; the caller holds e.mu.
func (e *entry) state(now int64) store.BucketState {
	st, at := bucket.Align(e.lim, e.st, now, skewMs)
	r := bucket.Refill(e.lim, st, at)
	bs := store.BucketState{
		Bucket:       e.b,
		Tokens:       r.Tokens,
		LastRefill:   r.Last,
		ActiveLeases: len(e.leases),
		Now:          time.UnixMilli(now),
	}
	if x := e.earliestExpiry(); x != 0 {
		bs.NextExpiry = time.UnixMilli(x)
	}
	return bs
}

// Reconcile implements store.Store.
func (s *Store) Reconcile(ctx context.Context, req store.ReconcileRequest) (store.ReconcileResult, error) {
	if err := s.check(); err != nil {
		return store.ReconcileResult{}, err
	}
	now := req.Now.UnixMilli()
	limit := req.Limit
	var expired []*lease
	var res store.ReconcileResult
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, l := range sh.m {
			if l.expires.Load() <= now {
				if len(expired) == limit {
					res.More = true
					break
				}
				expired = append(expired, l)
			}
		}
		sh.mu.Unlock()
		if res.More {
			break
		}
	}
	dims := map[string]bool{}
	for _, l := range expired {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		restored, ok, orphan := s.remove(l, now)
		if !ok {
			continue // released, reconciled or extended concurrently
		}
		res.Restored++
		if orphan {
			res.Orphans++
			continue
		}
		for i, it := range l.items {
			if s.lookup(it.Dimension) == l.ents[i] {
				dims[it.Dimension] = true
			}
		}
		// Reclaimed and AlreadyCapped count leases, not items: a lease
		// holding two concurrent dimensions is one reclaimed lease.
		if len(restored) > 0 {
			res.Reclaimed++
		}
		for _, r := range restored {
			if r.Capped {
				res.AlreadyCapped++
				break
			}
		}
	}
	for d := range dims {
		res.Dimensions = append(res.Dimensions, d)
	}
	slices.Sort(res.Dimensions)
	return res, nil
}

// PutBucket implements store.Store.
func (s *Store) PutBucket(ctx context.Context, req store.PutBucketRequest) error {
	if err := s.check(); err != nil {
		return err
	}
	ms, b := req.Now.UnixMilli(), req.Bucket
	lim := b.Config.Limits()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.lookup(b.Name); e != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		if err := store.CheckTypeChange(e.b, b); err != nil {
			return err
		}
		st, at := bucket.Align(e.lim, e.st, ms, skewMs)
		e.b, e.lim, e.st = b, lim, bucket.Reconfigure(e.lim, lim, st, at, req.Reset)
		return nil
	}
	old := *s.buckets.Load()
	m := make(map[string]*entry, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[b.Name] = &entry{name: b.Name, b: b, lim: lim, st: bucket.State{Tokens: lim.Capacity, Last: ms}}
	s.buckets.Store(&m)
	return nil
}

// DeleteBucket implements store.Store.
func (s *Store) DeleteBucket(ctx context.Context, req store.DeleteBucketRequest) error {
	if err := s.check(); err != nil {
		return err
	}
	name := req.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.buckets.Load()
	e := old[name]
	if e == nil {
		return &store.ConfigurationError{Dimension: name}
	}
	m := make(map[string]*entry, len(old))
	for k, v := range old {
		if k != name {
			m[k] = v
		}
	}
	s.buckets.Store(&m)
	e.mu.Lock()
	e.deleted = true
	e.mu.Unlock()
	return nil
}

// ListBuckets implements store.Store.
func (s *Store) ListBuckets(ctx context.Context, req store.ListBucketsRequest) ([]store.BucketState, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ms := req.Now.UnixMilli()
	m := *s.buckets.Load()
	out := make([]store.BucketState, 0, len(m))
	for _, e := range m {
		e.mu.Lock()
		if !e.deleted {
			out = append(out, e.state(ms))
		}
		e.mu.Unlock()
	}
	return out, nil
}

// Leases implements store.Store.
func (s *Store) Leases(ctx context.Context, q store.LeaseQuery) ([]store.LeaseRecord, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	now := q.Now.UnixMilli()
	var out []store.LeaseRecord
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, l := range sh.m {
			exp := l.expires.Load()
			if q.ExpiredOnly && exp > now {
				continue
			}
			if q.Dimension != "" && !slices.ContainsFunc(l.items, func(it store.Item) bool { return it.Dimension == q.Dimension }) {
				continue
			}
			out = append(out, store.LeaseRecord{
				ID: l.id, Items: slices.Clone(l.items), Caller: l.caller,
				CreatedAt: time.UnixMilli(l.created), ExpiresAt: time.UnixMilli(exp),
			})
		}
		sh.mu.Unlock()
	}
	return out, nil
}
