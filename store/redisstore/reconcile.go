package redisstore

import (
	"context"
	"slices"

	"github.com/ontopix/sluice/store"
)

// Reconcile implements store.Store: vendor by vendor, each vendor's expired
// records in script calls of at most reconcileChunk, never more than
// req.Limit records in all.
func (s *Store) Reconcile(ctx context.Context, req store.ReconcileRequest) (store.ReconcileResult, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.ReconcileResult{}, err
	}
	defer done(cancel)
	now := s.now(req.Now)
	limit := req.Limit
	vs, err := s.vendors(ctx)
	if err != nil {
		return store.ReconcileResult{}, fail("reconcile", err)
	}
	var res store.ReconcileResult
vendors:
	for _, vendor := range vs {
		for {
			left := limit - res.Restored
			if left <= 0 {
				res.More = true // there may be more; the next batch will tell
				break vendors
			}
			// One script call handles at most reconcileChunk leases, so a
			// large Limit never blocks the server for long.
			n := min(left, reconcileChunk)
			v, err := s.runW(ctx, "reconcile", reconcileScript, []string{s.leaseIndex(vendor)}, s.keyspace, now, n)
			if err != nil {
				return res, err
			}
			r := reply{v: v}
			more := r.int() == 1
			done := int(r.int())
			res.Restored += done
			res.Reclaimed += int(r.int())
			res.AlreadyCapped += int(r.int())
			res.Orphans += int(r.int())
			for r.more() && r.err == nil {
				res.Dimensions = append(res.Dimensions, r.str())
			}
			if r.err != nil {
				return res, r.err
			}
			if !more {
				break // this vendor is done
			}
			if done == 0 {
				res.More = true
				break vendors
			}
		}
	}
	slices.Sort(res.Dimensions)
	res.Dimensions = slices.Compact(res.Dimensions)
	if res.Reclaimed > 0 {
		s.publishFreed(ctx, res.Dimensions)
	}
	return res, nil
}
