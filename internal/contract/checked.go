package contract

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/ontopix/sluice/store"
)

// Checked returns s behind the portable layer's checks: every request is
// validated and defaulted before s sees it, and listings come back sorted
// and truncated. It is how package sluice's Client calls a store, and how
// the conformance suite does, so that both see the same errors.
// A store already behind Checked is returned as it is.
//
// The result implements every optional operation of the contract
// (store.Queuer, store.Cooler, store.Syncer); one that s lacks returns an
// error matching errors.ErrUnsupported. Use Unwrap to ask what s itself
// implements.
func Checked(s store.Store) store.Store {
	if c, ok := s.(checked); ok {
		return c
	}
	return checked{s}
}

// Unwrap returns the store behind Checked and behind every wrapper that
// names the store it wraps (an Unwrap() store.Store method), or s itself:
// the store whose optional capabilities (freed-slot notices, whose clock
// decides) a caller looks for, since wrappers hide them.
func Unwrap(s store.Store) store.Store {
	for {
		switch w := s.(type) {
		case checked:
			s = w.s
		case interface{ Unwrap() store.Store }:
			s = w.Unwrap()
		default:
			return s
		}
	}
}

type checked struct{ s store.Store }

var (
	_ store.Queuer = checked{}
	_ store.Cooler = checked{}
	_ store.Syncer = checked{}
	_ store.Usager = checked{}
)

func (c checked) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	if err := Acquire(req); err != nil {
		return err
	}
	return c.s.Acquire(ctx, req, res)
}

func (c checked) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	if err := Release(req); err != nil {
		return store.ReleaseResult{}, err
	}
	return c.s.Release(ctx, req)
}

func (c checked) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	if err := Adjust(req); err != nil {
		return store.Settlement{}, err
	}
	return c.s.Adjust(ctx, req)
}

func (c checked) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	if err := Extend(req); err != nil {
		return time.Time{}, err
	}
	return c.s.Extend(ctx, req)
}

func (c checked) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	if err := Penalize(req); err != nil {
		return store.Penalty{}, err
	}
	return c.s.Penalize(ctx, req)
}

func (c checked) Cooldown(ctx context.Context, req store.CooldownRequest) (store.CooldownResult, error) {
	if err := Cooldown(req); err != nil {
		return store.CooldownResult{}, err
	}
	return AsCooler(c.s).Cooldown(ctx, req)
}

func (c checked) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	if err := Sync(req); err != nil {
		return store.SyncResult{}, err
	}
	return AsSyncer(c.s).Sync(ctx, req)
}

func (c checked) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	if err := Peek(req); err != nil {
		return nil, err
	}
	return c.s.Peek(ctx, req)
}

func (c checked) Reconcile(ctx context.Context, req store.ReconcileRequest) (store.ReconcileResult, error) {
	if err := Reconcile(&req); err != nil {
		return store.ReconcileResult{}, err
	}
	return c.s.Reconcile(ctx, req)
}

func (c checked) PutBucket(ctx context.Context, req store.PutBucketRequest) error {
	if err := PutBucket(req); err != nil {
		return err
	}
	return c.s.PutBucket(ctx, req)
}

func (c checked) DeleteBucket(ctx context.Context, req store.DeleteBucketRequest) error {
	if err := Name(req.Name); err != nil {
		return err
	}
	return c.s.DeleteBucket(ctx, req)
}

func (c checked) ListBuckets(ctx context.Context, req store.ListBucketsRequest) ([]store.BucketState, error) {
	if err := Now(req.Now); err != nil {
		return nil, err
	}
	out, err := c.s.ListBuckets(ctx, req)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b store.BucketState) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (c checked) Leases(ctx context.Context, q store.LeaseQuery) ([]store.LeaseRecord, error) {
	if err := Leases(q); err != nil {
		return nil, err
	}
	out, err := c.s.Leases(ctx, q)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b store.LeaseRecord) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID.String(), b.ID.String())
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

func (c checked) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	if err := Reserve(req); err != nil {
		return err
	}
	return AsQueuer(c.s).Reserve(ctx, req, res)
}

func (c checked) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	if err := Cancel(req); err != nil {
		return store.CancelResult{}, err
	}
	return AsQueuer(c.s).Cancel(ctx, req)
}

func (c checked) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	if err := Dequeue(req); err != nil {
		return err
	}
	return AsQueuer(c.s).Dequeue(ctx, req)
}

func (c checked) Close() error { return c.s.Close() }

// PutUsage and ListUsage forward to the store (which validates the rows
// itself), or answer errors.ErrUnsupported when it keeps no history.
func (c checked) PutUsage(ctx context.Context, rows []store.UsageRow, r store.UsageRetention) error {
	return AsUsager(c.s).PutUsage(ctx, rows, r)
}

func (c checked) ListUsage(ctx context.Context, q store.UsageQuery) ([]store.UsageRow, error) {
	return AsUsager(c.s).ListUsage(ctx, q)
}
