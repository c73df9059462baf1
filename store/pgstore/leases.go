package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/ontopix/sluice/store"
)

// Leases implements store.Store in one read-only statement.
func (s *Store) Leases(ctx context.Context, q store.LeaseQuery) ([]store.LeaseRecord, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	ms := s.now(q.Now)
	if !sendable(q.Dimension) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.leases, ms, q.ExpiredOnly, q.Dimension, int64(max(q.Limit, 0)))
	if err != nil {
		return nil, fail("leases", err)
	}
	defer rows.Close()
	var out []store.LeaseRecord
	for rows.Next() {
		var (
			id               pgtype.UUID
			dims             []string
			costs            []int64
			caller           string
			created, expires int64
			valid            int64
		)
		if err := rows.Scan(&id, &dims, &costs, &caller, &created, &expires, &valid); err != nil {
			return nil, fail("leases", err)
		}
		l := store.LeaseRecord{ID: store.LeaseID(id.Bytes), Caller: caller,
			CreatedAt: time.UnixMilli(created), ExpiresAt: time.UnixMilli(expires), Items: make([]store.Item, len(dims))}
		if valid != 0 {
			l.ValidAt = time.UnixMilli(valid)
		}
		for i := range dims {
			l.Items[i] = store.Item{Dimension: dims[i], Cost: costs[i]}
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("leases", err)
	}
	return out, nil
}
