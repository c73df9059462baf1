package redisstore

import (
	"context"

	"github.com/ontopix/sluice/store"
)

// Peek implements store.Store: one script call per Cluster slot (one in
// all on a standalone server).
func (s *Store) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done(cancel)
	ms, dimensions := s.now(req.Now), req.Dimensions
	out := make([]store.BucketState, len(dimensions))
	found := make([]bool, len(dimensions))
	groups := map[uint16][]int{}
	var order []uint16
	for i, d := range dimensions {
		g := uint16(0)
		if s.slotCheck {
			g = s.dim(d).slot
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range order {
		idx := groups[g]
		keys := make([]string, 0, 3*len(idx))
		for _, i := range idx {
			k := s.dim(dimensions[i])
			keys = append(keys, k.bucket, k.index, k.qexp)
		}
		v, err := s.run(ctx, "peek", peekScript, keys, ms, s.skewMs)
		if err != nil {
			return nil, err
		}
		r := reply{v: v}
		at := r.int()
		for _, i := range idx {
			found[i] = r.int() == 1
			out[i] = readState(&r, dimensions[i], at)
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	for i, d := range dimensions {
		if !found[i] {
			return nil, &store.ConfigurationError{Dimension: d}
		}
	}
	return out, nil
}
