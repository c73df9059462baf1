package redisstore

import (
	"context"
	"time"

	"github.com/ontopix/sluice/store"
)

// Extend implements store.Store.
func (s *Store) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer done(cancel)
	now := s.now(req.Now)
	id := req.ID.String()
	var exp time.Time
	found, err := s.onLease(ctx, req.ID, s.hint(req.Hint), func(vendor string) (bool, error) {
		v, err := s.runW(ctx, "extend", extendScript,
			s.leaseKeys(vendor, id),
			s.keyspace, id, now, req.TTL.Milliseconds())
		if err != nil {
			return false, err
		}
		r := reply{v: v}
		switch r.int() {
		case 0:
			return false, r.err
		case -1:
			return true, store.ErrLeaseExpired
		}
		exp = time.UnixMilli(r.int())
		return true, r.err
	})
	if err != nil {
		return time.Time{}, err
	}
	if !found {
		return time.Time{}, store.ErrUnknownLease
	}
	return exp, nil
}
