package pgstore

import (
	"context"
	"fmt"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Cooldown implements store.Cooler in one call of the cooldown function.
// The cooldown lasts req.Until − req.Now from the decision time: the
// server's clock, or req.Now with WithCallerClock (the bucket's last write
// for a caller behind it, as bucket.Align says). The result's
// Until is in the clock the store decides by.
func (s *Store) Cooldown(ctx context.Context, req store.CooldownRequest) (store.CooldownResult, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.CooldownResult{}, err
	}
	dur := req.Until.Sub(req.Now).Milliseconds()
	var code *string
	var before, after, until *int64
	if err := s.pool.QueryRow(ctx, s.q.cooldown, req.Dimension, s.now(req.Now), dur, s.skewMs()).
		Scan(&code, &before, &after, &until); err != nil {
		return store.CooldownResult{}, fail("cooldown", err)
	}
	if code != nil {
		return store.CooldownResult{}, coolError("cooldown", req.Dimension, *code)
	}
	return store.CooldownResult{Before: *before, After: *after, Until: *until}, nil
}

// Sync implements store.Syncer in one call of the sync function.
func (s *Store) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.SyncResult{}, err
	}
	var code *string
	var before, after *int64
	if err := s.pool.QueryRow(ctx, s.q.sync, req.Dimension, s.now(req.Now), req.Remaining, s.skewMs()).
		Scan(&code, &before, &after); err != nil {
		return store.SyncResult{}, fail("sync", err)
	}
	if code != nil {
		return store.SyncResult{}, coolError("sync", req.Dimension, *code)
	}
	return store.SyncResult{Before: *before, After: *after}, nil
}

// coolError turns the error code of the cooldown and sync functions into
// the contract's error.
func coolError(op, dimension, code string) error {
	switch code {
	case "unknown":
		return &store.ConfigurationError{Dimension: dimension}
	case "concurrent":
		return (&store.Bucket{Name: dimension, Config: bucket.Config{Type: bucket.Concurrent}}).CheckCoolable(op)
	}
	return fmt.Errorf("pgstore: %s: unexpected result %q", op, code)
}
