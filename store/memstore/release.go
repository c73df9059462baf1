package memstore

import (
	"context"

	"github.com/ontopix/sluice/store"
)

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	if err := s.check(); err != nil {
		return store.ReleaseResult{}, err
	}
	sh := s.shard(req.ID)
	sh.mu.Lock()
	l := sh.m[req.ID]
	sh.mu.Unlock()
	if l == nil {
		return store.ReleaseResult{}, nil
	}
	restored, ok, _ := s.remove(l, 0)
	if !ok {
		return store.ReleaseResult{}, nil
	}
	s.notifyRestored(restored)
	return store.ReleaseResult{Released: true, Restored: restored}, nil
}
