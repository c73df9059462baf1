package redisstore

import (
	"context"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Adjust implements store.Store.
func (s *Store) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Settlement{}, err
	}
	defer done(cancel)
	now := s.now(req.Now)
	k := s.dim(req.Dimension)
	id := req.ID.String()
	recorded, exp := 0, int64(0)
	if req.Recorded {
		recorded = 1
	} else if !req.ExpiresAt.IsZero() {
		exp = req.ExpiresAt.UnixMilli()
	}
	var res store.Settlement
	var opErr error
	try := func(vendor string) (bool, error) {
		if s.slotCheck && Slot(vendor) != k.slot { // the lease cannot hold this dimension
			opErr = &bucket.FieldError{Field: "dimension", Value: req.Dimension, Reason: "is not part of lease " + id}
			return true, nil
		}
		v, err := s.runW(ctx, "adjust", adjustScript, []string{k.bucket, s.vendorTag(vendor) + ":lease:" + id},
			now, recorded, req.Dimension, req.Delta, req.Held, exp, s.skewMs, opKey(s.vendorTag(vendor), "adjust", req.Op), s.opWindowMs)
		if err != nil {
			return false, err
		}
		r := reply{v: v}
		switch r.int() {
		case -1:
			opErr = &store.ConfigurationError{Dimension: req.Dimension}
		case -2:
			opErr = (&store.Bucket{Name: req.Dimension, Config: bucket.Config{Type: bucket.Concurrent}}).CheckAdjustable()
		case -3:
			return false, r.err
		case -4:
			opErr = store.ErrLeaseExpired
		case -5:
			opErr = &bucket.FieldError{Field: "dimension", Value: req.Dimension, Reason: "is not part of lease " + id}
		case -6:
			_, opErr = store.AdjustHeld(req.Dimension, r.int(), req.Delta)
		default:
			res = store.Settlement{Held: r.int(), Applied: r.int(), Remaining: r.int()}
		}
		return true, r.err
	}
	var found bool
	if req.Recorded {
		found, err = s.onLease(ctx, req.ID, k, try)
	} else {
		found, err = try(k.vendor)
	}
	switch {
	case err != nil:
		return store.Settlement{}, err
	case opErr != nil:
		return store.Settlement{}, opErr
	case !found:
		return store.Settlement{}, store.ErrUnknownLease
	}
	return res, nil
}
