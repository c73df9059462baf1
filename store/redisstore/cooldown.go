package redisstore

import (
	"context"
	"fmt"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Cooldown implements store.Cooler in one script call. The cooldown lasts
// req.Until − req.Now from the script's decision time: the server's TIME
// by default, or req.Now (or the bucket's refill time, for a caller
// behind it) with WithCallerClock. The bucket hash keeps its end
// in the field u.
func (s *Store) Cooldown(ctx context.Context, req store.CooldownRequest) (store.CooldownResult, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.CooldownResult{}, err
	}
	defer done(cancel)
	now := s.now(req.Now)
	d := req.Until.Sub(req.Now).Milliseconds()
	v, err := s.runW(ctx, "cooldown", cooldownScript, []string{s.dim(req.Dimension).bucket}, now, d, s.skewMs)
	if err != nil {
		return store.CooldownResult{}, err
	}
	r := reply{v: v}
	if err := timeBasedStatus(&r, req.Dimension, "cooldown"); err != nil {
		return store.CooldownResult{}, err
	}
	res := store.CooldownResult{Before: r.int(), After: r.int(), Until: r.int()}
	return res, r.err
}

// Sync implements store.Syncer in one script call.
func (s *Store) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.SyncResult{}, err
	}
	defer done(cancel)
	now := s.now(req.Now)
	v, err := s.runW(ctx, "sync", syncScript, []string{s.dim(req.Dimension).bucket}, now,
		req.Remaining*bucket.Milli, s.skewMs)
	if err != nil {
		return store.SyncResult{}, err
	}
	r := reply{v: v}
	if err := timeBasedStatus(&r, req.Dimension, "sync"); err != nil {
		return store.SyncResult{}, err
	}
	res := store.SyncResult{Before: r.int(), After: r.int()}
	return res, r.err
}

// timeBasedStatus reads the status of cooldown.lua's and sync.lua's reply:
// -1 for an unknown dimension, -2 for a concurrent one, 1 when op ran.
func timeBasedStatus(r *reply, dimension, op string) error {
	switch st := r.int(); {
	case r.err != nil:
		return r.err
	case st == -1:
		return &store.ConfigurationError{Dimension: dimension}
	case st == -2:
		return (&store.Bucket{Name: dimension, Config: bucket.Config{Type: bucket.Concurrent}}).CheckCoolable(op)
	case st != 1:
		return fmt.Errorf("redisstore: %s: unexpected status %d", op, st)
	}
	return nil
}
