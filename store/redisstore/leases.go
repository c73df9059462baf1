package redisstore

import (
	"context"
	"slices"
	"strings"

	"github.com/ontopix/sluice/store"
)

// Leases implements store.Store: vendor by vendor, each vendor's index in
// script calls that read at most leasePage entries (so a listing of many
// records never blocks the server for long), until the vendor has given
// q.Limit matching records or none are left; then sorted by expiry.
func (s *Store) Leases(ctx context.Context, q store.LeaseQuery) ([]store.LeaseRecord, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done(cancel)
	ms := s.now(q.Now)
	vs, err := s.vendors(ctx)
	if err != nil {
		return nil, fail("leases", err)
	}
	var out []store.LeaseRecord
	for _, v := range vs {
		if out, err = s.vendorLeases(ctx, v, q, ms, out); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b store.LeaseRecord) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID.String(), b.ID.String())
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}
