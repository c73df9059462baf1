package pgstore

import (
	"context"
	"time"

	"github.com/ontopix/sluice/store"
)

// Extend implements store.Store in one call of the extend function.
func (s *Store) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return time.Time{}, err
	}
	now := s.now(req.Now)
	var status int
	var exp *int64
	if err := s.pool.QueryRow(ctx, s.q.extend, uuidOf(req.ID), now, req.TTL.Milliseconds()).Scan(&status, &exp); err != nil {
		return time.Time{}, fail("extend", err)
	}
	switch status {
	case 1:
		return time.Time{}, store.ErrUnknownLease
	case 2:
		return time.Time{}, store.ErrLeaseExpired
	}
	return time.UnixMilli(*exp), nil
}
