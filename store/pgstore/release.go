package pgstore

import (
	"context"

	"github.com/ontopix/sluice/store"
)

// Release implements store.Store in one call of the release function.
func (s *Store) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.ReleaseResult{}, err
	}
	var released bool
	var dims []string
	var costs []int64
	var capped []bool
	var notices int64
	if err := s.pool.QueryRow(ctx, s.q.release, uuidOf(req.ID)).Scan(&released, &dims, &costs, &capped, &notices); err != nil {
		return store.ReleaseResult{}, fail("release", err)
	}
	if !released {
		return store.ReleaseResult{}, nil
	}
	res := store.ReleaseResult{Released: true}
	for i := range dims {
		res.Restored = append(res.Restored, store.Restored{Dimension: dims[i], Cost: costs[i], Capped: capped[i]})
	}
	return res, nil
}
