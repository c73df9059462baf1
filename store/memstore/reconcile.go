package memstore

import (
	"context"
	"slices"

	"github.com/ontopix/sluice/store"
)

// Reconcile implements store.Store.
func (s *Store) Reconcile(ctx context.Context, req store.ReconcileRequest) (store.ReconcileResult, error) {
	if err := s.check(); err != nil {
		return store.ReconcileResult{}, err
	}
	now := req.Now.UnixMilli()
	limit := req.Limit
	var expired []*lease
	var res store.ReconcileResult
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, l := range sh.m {
			if l.expires.Load() <= now {
				if len(expired) == limit {
					res.More = true
					break
				}
				expired = append(expired, l)
			}
		}
		sh.mu.Unlock()
		if res.More {
			break
		}
	}
	dims := map[string]bool{}
	for _, l := range expired {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		restored, ok, orphan := s.remove(l, now)
		if !ok {
			continue // released, reconciled or extended concurrently
		}
		res.Restored++
		if orphan {
			res.Orphans++
			continue
		}
		for i, it := range l.items {
			if s.lookup(it.Dimension) == l.ents[i] {
				dims[it.Dimension] = true
			}
		}
		// Reclaimed and AlreadyCapped count leases, not items: a lease
		// holding two concurrent dimensions is one reclaimed lease.
		if len(restored) > 0 {
			res.Reclaimed++
			s.notifyRestored(restored)
		}
		for _, r := range restored {
			if r.Capped {
				res.AlreadyCapped++
				break
			}
		}
	}
	for d := range dims {
		res.Dimensions = append(res.Dimensions, d)
	}
	slices.Sort(res.Dimensions)
	return res, nil
}
