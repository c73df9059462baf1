package memstore

import (
	"context"
	"time"

	"github.com/ontopix/sluice/store"
)

// Extend implements store.Store.
func (s *Store) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	if err := s.check(); err != nil {
		return time.Time{}, err
	}
	now := req.Now.UnixMilli()
	sh := s.shard(req.ID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l := sh.m[req.ID]
	if l == nil {
		return time.Time{}, store.ErrUnknownLease
	}
	if l.expires.Load() <= now {
		return time.Time{}, store.ErrLeaseExpired
	}
	exp := now + req.TTL.Milliseconds()
	l.expires.Store(exp)
	return time.UnixMilli(exp), nil
}
