package dynamostore

import (
	"context"
	"errors"

	"github.com/ontopix/sluice/store"
)

// TEMPORARY (branch w-core only, never merged to main): placeholders so
// the tree builds while this store's cooldown and sync are written.

// Cooldown implements store.Store.
func (s *Store) Cooldown(ctx context.Context, req store.CooldownRequest) (store.CooldownResult, error) {
	return store.CooldownResult{}, errors.ErrUnsupported
}

// Sync implements store.Store.
func (s *Store) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	return store.SyncResult{}, errors.ErrUnsupported
}
