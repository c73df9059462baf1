package memstore

import (
	"context"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

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
	st := e.st
	at, _ := bucket.Align(e.lim, st, now, skewMs)
	before := bucket.Available(e.lim, st, at)
	e.st = bucket.Penalize(e.lim, st, at, req.FactorMilli)
	return store.Penalty{Before: before, After: e.st.Tokens}, nil
}
