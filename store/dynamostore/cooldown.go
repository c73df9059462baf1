package dynamostore

import (
	"context"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Cooldown implements store.Cooler in one UpdateItem conditioned on the
// version of the row it was decided on, like Penalize (see rewrite). The
// cooldown's end is written to the row's cooldown_until_ms attribute in
// the caller's clock: it lasts req.Until − req.Now from the decision time,
// which is req.Now or, for a caller behind the row's refill timestamp,
// that timestamp (bucket.Align).
func (s *Store) Cooldown(ctx context.Context, req store.CooldownRequest) (store.CooldownResult, error) {
	var res store.CooldownResult
	check := func(b *store.Bucket) error { return b.CheckCoolable("cooldown") }
	span := req.Until.Sub(req.Now).Milliseconds()
	err := s.rewrite(ctx, req.Now.UnixMilli(), req.Dimension, "cooldown", check, func(bi *bucketItem, al bucket.State, at int64) bucket.State {
		st := bucket.Cooldown(bi.lim, al, at, at+span)
		res = store.CooldownResult{Before: bucket.Available(bi.lim, al, at), After: st.Tokens, Until: st.Until}
		return st
	})
	if err != nil {
		return store.CooldownResult{}, err
	}
	return res, nil
}

// Sync implements store.Syncer in one UpdateItem conditioned on the
// version of the row it was decided on, like Penalize (see rewrite).
func (s *Store) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	var res store.SyncResult
	check := func(b *store.Bucket) error { return b.CheckCoolable("sync") }
	err := s.rewrite(ctx, req.Now.UnixMilli(), req.Dimension, "sync", check, func(bi *bucketItem, al bucket.State, at int64) bucket.State {
		st := bucket.Sync(bi.lim, al, at, req.Remaining*bucket.Milli)
		res = store.SyncResult{Before: bucket.Available(bi.lim, al, at), After: st.Tokens}
		return st
	})
	if err != nil {
		return store.SyncResult{}, err
	}
	return res, nil
}
