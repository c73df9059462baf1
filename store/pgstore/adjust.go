package pgstore

import (
	"context"
	"fmt"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Adjust implements store.Store in one call of the adjust function.
func (s *Store) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.Settlement{}, err
	}
	now := s.now(req.Now)
	var expires *int64
	if !req.Recorded && !req.ExpiresAt.IsZero() {
		ms := req.ExpiresAt.UnixMilli()
		expires = &ms
	}
	var code *string
	var held, applied, remaining *int64
	err = s.pool.QueryRow(ctx, s.q.adjust, req.Dimension, req.Delta, now, uuidOf(req.ID), req.Recorded, req.Held, expires, s.skewMs()).
		Scan(&code, &held, &applied, &remaining)
	if err != nil {
		return store.Settlement{}, fail("adjust", err)
	}
	if code != nil {
		switch *code {
		case "unknown":
			return store.Settlement{}, &store.ConfigurationError{Dimension: req.Dimension}
		case "concurrent":
			return store.Settlement{}, (&store.Bucket{Name: req.Dimension, Config: bucket.Config{Type: bucket.Concurrent}}).CheckAdjustable()
		case "nolease":
			return store.Settlement{}, store.ErrUnknownLease
		case "expired":
			return store.Settlement{}, store.ErrLeaseExpired
		case "notinlease":
			return store.Settlement{}, &bucket.FieldError{Field: "dimension", Value: req.Dimension, Reason: "is not part of lease " + req.ID.String()}
		case "refund":
			_, err := store.AdjustHeld(req.Dimension, deref(held), req.Delta)
			if err == nil {
				err = fmt.Errorf("pgstore: adjust: refund of %d refused with %d held", -req.Delta, deref(held))
			}
			return store.Settlement{}, err
		}
		return store.Settlement{}, fmt.Errorf("pgstore: adjust: unexpected result %q", *code)
	}
	return store.Settlement{Held: *held, Applied: *applied, Remaining: *remaining}, nil
}
