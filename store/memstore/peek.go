package memstore

import (
	"context"

	"github.com/ontopix/sluice/store"
)

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
