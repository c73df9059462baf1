package sluice

import (
	"context"
	"errors"
	"log/slog"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// WithBuckets declares the buckets the client's limits are made of, as a
// limits file does (limits.NewClient passes the file's). When the store
// answers that one of them does not exist, as a store restarted without
// persistence does for all of them, the client creates it again, but only
// if it is still missing: of several replicas re-creating it at once
// exactly one succeeds, and none refills a bucket another one re-created
// and callers already spent from.
//
// A time-based bucket comes back empty (store.PutBucketRequest.Empty): a
// balance of zero, refilling from the re-creation on. The fleet spent its
// tokens before the store lost them, and a full bucket would let it spend
// them again, up to a whole capacity over the limit; empty, it admits only
// what it earns, so that over any window spanning the loss the fleet is
// admitted at most the capacity plus the refill of the window. A
// concurrent bucket comes back with every slot free: its holders' lease
// records were lost with it, so their releases restore nothing and an
// empty one would stay blocked for good. Until the holders still running
// finish, at most their hold time, the fleet may hold up to that many
// slots over the limit.
//
// The client then logs bucket.recreated
// (dimension, op; only the replica whose creation succeeded), reports it
// to Observer.Recreated and retries the call once per re-created bucket.
// A dimension that bs does not declare is still a *ConfigurationError:
// a configuration mistake, never taken for an outage. Acquisitions,
// reservations (Wait, WithSlot), Peek, Penalize, Cooldown and Sync
// re-create; releasing or settling a lease granted before the bucket was
// lost does not.
func WithBuckets(bs []Bucket) Option {
	return func(cl *Client) { cl.declared = append([]Bucket(nil), bs...) }
}

// recreating is the store layer of a client with declared buckets: it
// re-creates a declared bucket the store reports missing and retries the
// call.
type recreating struct {
	store.Store
	c        *Client
	declared map[string]Bucket
}

// declare validates the declared buckets and wraps the client's store.
func (c *Client) declare() error {
	if len(c.declared) == 0 {
		return nil
	}
	m := make(map[string]Bucket, len(c.declared))
	for _, b := range c.declared {
		if err := contract.Bucket(b); err != nil {
			return err
		}
		if _, dup := m[b.Name]; dup {
			return invalid("buckets", b.Name, "each dimension may be declared once")
		}
		m[b.Name] = b
	}
	c.st = &recreating{Store: c.st, c: c, declared: m}
	return nil
}

// retryMissing runs call, and after each failure naming a declared bucket
// that recreate put back, runs it again: once per bucket, since an
// acquisition on several dimensions may find several missing.
func retryMissing[T any](ctx context.Context, r *recreating, op string, call func() (T, error)) (T, error) {
	for n := 0; ; n++ {
		v, err := call()
		if err == nil || n > store.MaxItems {
			return v, err
		}
		again, perr := r.recreate(ctx, op, err)
		if perr != nil {
			return v, perr
		}
		if !again {
			return v, err
		}
	}
}

// recreate puts back, if still absent, the declared bucket err reports
// missing. It reports whether the call should be retried; perr is the
// error of a creation that failed (the store unreachable, say), which the
// caller returns instead.
func (r *recreating) recreate(ctx context.Context, op string, err error) (again bool, perr error) {
	var ce *store.ConfigurationError
	if !errors.As(err, &ce) {
		return false, nil
	}
	b, ok := r.declared[ce.Dimension]
	if !ok {
		return false, nil
	}
	perr = r.Store.PutBucket(ctx, store.PutBucketRequest{Now: r.c.clock.Now(), Bucket: b, IfAbsent: true, Empty: true})
	switch {
	case perr == nil:
		r.c.log.LogAttrs(ctx, slog.LevelWarn, "bucket.recreated", slog.String("dimension", b.Name), slog.String("op", op))
		if o := r.c.obs; o != nil && o.Recreated != nil {
			o.Recreated(ctx, RecreateEvent{Dimension: b.Name, Op: op})
		}
	case errors.Is(perr, store.ErrConflict):
		// Another caller or replica re-created it first.
	default:
		return false, perr
	}
	return true, nil
}

// recreating forwards every optional operation of the contract; one that
// the store lacks answers errors.ErrUnsupported (see Client.detect).
var (
	_ store.Queuer = (*recreating)(nil)
	_ store.Cooler = (*recreating)(nil)
	_ store.Syncer = (*recreating)(nil)
)

type none struct{}

func (r *recreating) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	_, err := retryMissing(ctx, r, "acquire", func() (none, error) { return none{}, r.Store.Acquire(ctx, req, res) })
	return err
}

func (r *recreating) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	_, err := retryMissing(ctx, r, "reserve", func() (none, error) { return none{}, contract.AsQueuer(r.Store).Reserve(ctx, req, res) })
	return err
}

func (r *recreating) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	return retryMissing(ctx, r, "peek", func() ([]store.BucketState, error) { return r.Store.Peek(ctx, req) })
}

func (r *recreating) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	return retryMissing(ctx, r, "penalize", func() (store.Penalty, error) { return r.Store.Penalize(ctx, req) })
}

func (r *recreating) Cooldown(ctx context.Context, req store.CooldownRequest) (store.CooldownResult, error) {
	return retryMissing(ctx, r, "cooldown", func() (store.CooldownResult, error) { return contract.AsCooler(r.Store).Cooldown(ctx, req) })
}

func (r *recreating) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	return retryMissing(ctx, r, "sync", func() (store.SyncResult, error) { return contract.AsSyncer(r.Store).Sync(ctx, req) })
}

// Cancel and Dequeue concern leases and tickets, never a missing bucket
// worth re-creating: they are forwarded as they are.

func (r *recreating) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	return contract.AsQueuer(r.Store).Cancel(ctx, req)
}

func (r *recreating) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	return contract.AsQueuer(r.Store).Dequeue(ctx, req)
}
