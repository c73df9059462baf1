package memstore

import (
	"context"

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
	st := e.st
	at, _ := bucket.Align(e.lim, st, now, skewMs)
	var applied int64
	e.st, applied = bucket.Adjust(e.lim, st, at, req.Delta*bucket.Milli)
	held = store.HeldAfter(held, req.Delta, applied)
	if rec != nil {
		rec.Cost = held
	}
	return store.Settlement{Held: held, Applied: applied, Remaining: e.st.Tokens}, nil
}
