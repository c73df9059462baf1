package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/ontopix/sluice/store"
)

// Leases implements store.Store.
func (s *Store) Leases(ctx context.Context, q store.LeaseQuery) ([]store.LeaseRecord, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	now := q.Now.UnixMilli()
	var out []store.LeaseRecord
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, l := range sh.m {
			exp := l.expires.Load()
			if q.ExpiredOnly && exp > now {
				continue
			}
			if q.Dimension != "" && !slices.ContainsFunc(l.items, func(it store.Item) bool { return it.Dimension == q.Dimension }) {
				continue
			}
			rec := store.LeaseRecord{
				ID: l.id, Items: slices.Clone(l.items), Caller: l.caller,
				CreatedAt: time.UnixMilli(l.created), ExpiresAt: time.UnixMilli(exp),
			}
			if l.validAt != 0 {
				rec.ValidAt = time.UnixMilli(l.validAt)
			}
			out = append(out, rec)
		}
		sh.mu.Unlock()
	}
	return out, nil
}
