package dynamostore

import (
	"context"
	"errors"

	"github.com/ontopix/sluice/store"
)

// Reserve implements store.Store. Not supported yet by this store.
func (s *Store) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	return errors.ErrUnsupported
}

// Cancel implements store.Store. Not supported yet by this store.
func (s *Store) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	return store.CancelResult{}, errors.ErrUnsupported
}

// Dequeue implements store.Store. Not supported yet by this store.
func (s *Store) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	return errors.ErrUnsupported
}
