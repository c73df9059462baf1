package remotestore

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ontopix/sluice/store"
)

// Usage history (store.Usager) crosses the door to the store behind the
// service: a process on a remote store writes and reads the same rows as
// one on that store directly.

var _ store.Usager = (*Store)(nil)

// usageChunk is the most rows one PutUsage request carries: a put's rows
// are independent upserts, so a larger put is sent in parts that each
// stay well under the door's bound on a request's body.
const usageChunk = 500

// PutUsage implements store.Usager through the store behind the service;
// when that store keeps no usage history, it fails with an error matching
// errors.ErrUnsupported (see package history).
func (s *Store) PutUsage(ctx context.Context, rows []store.UsageRow, retention store.UsageRetention) error {
	if err := store.ValidateUsage(rows, retention); err != nil {
		return err
	}
	if !s.caps.Usager {
		return s.noUsage("PutUsage")
	}
	for len(rows) > 0 {
		n := min(len(rows), usageChunk)
		if err := s.do(ctx, http.MethodPost, "PutUsage", usagePut{Rows: rows[:n], Retention: retention}, nil); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// ListUsage implements store.Usager through the store behind the
// service; when that store keeps no usage history, it fails with an error
// matching errors.ErrUnsupported.
func (s *Store) ListUsage(ctx context.Context, q store.UsageQuery) ([]store.UsageRow, error) {
	if err := store.ValidateUsageQuery(q); err != nil {
		return nil, err
	}
	if !s.caps.Usager {
		return nil, s.noUsage("ListUsage")
	}
	return call[[]store.UsageRow](ctx, s, "ListUsage", q)
}

func (s *Store) noUsage(op string) error {
	return fmt.Errorf("remotestore: %s: the store behind %s keeps no usage history: %w", op, s.base, errors.ErrUnsupported)
}
