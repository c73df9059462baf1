package dynamostore

import (
	"context"

	"github.com/ontopix/sluice/store"
)

// Release implements store.Store. When DynamoDB's TTL process has deleted
// some or all of the lease's items, the slots their buckets still list in
// holders are restored from there (see remove); the lease's dimensions are
// then known only from an item that is left or from this process's cache.
func (s *Store) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.ReleaseResult{}, err
	}
	dims, err := s.findDims(ctx, req.ID)
	if err != nil || dims == nil {
		return store.ReleaseResult{}, err
	}
	lis, err := s.loadLease(ctx, req.ID.String(), dims)
	if err != nil {
		return store.ReleaseResult{}, err
	}
	r, err := s.remove(ctx, req.ID.String(), dims, lis, 0)
	if err != nil {
		return store.ReleaseResult{}, err
	}
	s.forgetLease(req.ID)
	if !r.ok {
		return store.ReleaseResult{}, nil
	}
	return store.ReleaseResult{Released: true, Restored: r.restored}, nil
}
