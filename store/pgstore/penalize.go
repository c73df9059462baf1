package pgstore

import (
	"context"
	"fmt"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Penalize implements store.Store in one call of the penalize function.
func (s *Store) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.Penalty{}, err
	}
	now := s.now(req.Now)
	var code *string
	var before, after *int64
	if err := s.pool.QueryRow(ctx, s.q.penalize, req.Dimension, now, req.FactorMilli, s.skewMs()).Scan(&code, &before, &after); err != nil {
		return store.Penalty{}, fail("penalize", err)
	}
	if code != nil {
		switch *code {
		case "unknown":
			return store.Penalty{}, &store.ConfigurationError{Dimension: req.Dimension}
		case "concurrent":
			return store.Penalty{}, (&store.Bucket{Name: req.Dimension, Config: bucket.Config{Type: bucket.Concurrent}}).CheckPenalizable()
		}
		return store.Penalty{}, fmt.Errorf("pgstore: penalize: unexpected result %q", *code)
	}
	return store.Penalty{Before: *before, After: *after}, nil
}
