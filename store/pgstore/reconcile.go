package pgstore

import (
	"context"
	"slices"

	"github.com/ontopix/sluice/store"
)

// Reconcile implements store.Store in one call of the reconcile function,
// which takes its batch with FOR UPDATE SKIP LOCKED: concurrent reconcilers
// split the expired records between them instead of waiting, and a record
// is restored by exactly one of them (or by Release).
func (s *Store) Reconcile(ctx context.Context, req store.ReconcileRequest) (store.ReconcileResult, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.ReconcileResult{}, err
	}
	var res store.ReconcileResult
	var dims []string
	var notices int64
	err = s.pool.QueryRow(ctx, s.q.reconcile, s.now(req.Now), int32(min(req.Limit, 1<<30))).
		Scan(&res.Restored, &res.Reclaimed, &res.AlreadyCapped, &res.Orphans, &dims, &res.More, &notices)
	if err != nil {
		return store.ReconcileResult{}, fail("reconcile", err)
	}
	if len(dims) > 0 {
		slices.Sort(dims)
		res.Dimensions = dims
	}
	return res, nil
}
