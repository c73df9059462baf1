package redisstore

import (
	"context"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Penalize implements store.Store.
func (s *Store) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Penalty{}, err
	}
	defer done(cancel)
	now := s.now(req.Now)
	k := s.dim(req.Dimension)
	v, err := s.runW(ctx, "penalize", penalizeScript, []string{k.bucket}, now, req.FactorMilli, s.skewMs, opKey(k.tag, "penalize", req.Op), s.opWindowMs)
	if err != nil {
		return store.Penalty{}, err
	}
	r := reply{v: v}
	switch r.int() {
	case -1:
		return store.Penalty{}, &store.ConfigurationError{Dimension: req.Dimension}
	case -2:
		return store.Penalty{}, (&store.Bucket{Name: req.Dimension, Config: bucket.Config{Type: bucket.Concurrent}}).CheckPenalizable()
	}
	res := store.Penalty{Before: r.int(), After: r.int()}
	return res, r.err
}
