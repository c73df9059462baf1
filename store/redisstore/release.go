package redisstore

import (
	"context"

	"github.com/ontopix/sluice/store"
)

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.ReleaseResult{}, err
	}
	defer done(cancel)
	var res store.ReleaseResult
	id := req.ID.String()
	_, err = s.onLease(ctx, req.ID, s.hint(req.Hint), func(vendor string) (bool, error) {
		v, err := s.runW(ctx, "release", releaseScript,
			s.leaseKeys(vendor, id), s.keyspace, id, s.freedChannel(),
			opKey(s.vendorTag(vendor), "release", req.Op), s.opWindowMs)
		if err != nil {
			return false, err
		}
		r := reply{v: v}
		if r.int() == 0 {
			return false, r.err
		}
		res.Released = true
		for r.more() {
			res.Restored = append(res.Restored, store.Restored{Dimension: r.str(), Cost: r.int(), Capped: r.int() == 1})
		}
		return true, r.err
	})
	if err != nil {
		return store.ReleaseResult{}, err
	}
	s.forgetLease(req.ID)
	return res, nil
}
