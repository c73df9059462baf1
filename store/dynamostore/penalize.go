package dynamostore

import (
	"context"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Penalize implements store.Store: a read, then an UpdateItem conditioned
// on the version that was read (a concurrent write makes it retry, so no
// penalty and no acquisition is ever lost).
func (s *Store) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.Penalty{}, err
	}
	now := req.Now.UnixMilli()
	for n := 0; n < maxAdminAttempts; n++ {
		if err := backoff(ctx, n); err != nil {
			return store.Penalty{}, err
		}
		bis, err := s.readBuckets(ctx, []string{req.Dimension})
		if err != nil {
			return store.Penalty{}, err
		}
		bi := bis[0]
		if err := bi.b.CheckPenalizable(); err != nil {
			return store.Penalty{}, err
		}
		al, at := bucket.Align(bi.lim, bi.st, now, s.skew)
		before := bucket.Available(bi.lim, al, at)
		st := bucket.Penalize(bi.lim, al, at, req.FactorMilli)
		ok, err := s.writeState(ctx, bi, st, "penalize")
		if err != nil {
			return store.Penalty{}, err
		}
		if ok {
			return store.Penalty{Before: before, After: st.Tokens}, nil
		}
	}
	return store.Penalty{}, store.ErrContention
}
