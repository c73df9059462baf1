package pgstore

import (
	"context"

	"github.com/ontopix/sluice/store"
)

// Peek implements store.Store in one read-only statement.
func (s *Store) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	dimensions := req.Dimensions
	rows, err := s.pool.Query(ctx, s.q.peek, s.now(req.Now), dimensions)
	if err != nil {
		return nil, fail("peek", err)
	}
	out, missing, err := s.scanBuckets(rows, len(dimensions))
	if err != nil {
		return nil, fail("peek", err)
	}
	if missing != "" {
		return nil, &store.ConfigurationError{Dimension: missing}
	}
	return out, nil
}
