package sluice

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// The operations below act on a recorded lease by its id, so that another
// process than the holder (an admin tool, a worker that settles usage
// reported later) can end, renew or settle it. A lease that was never
// recorded (see WithRecord) has no id the store knows.

// ReleaseLease releases the recorded lease id (see Lease.Release). A lease
// already released, or reclaimed by the reconciler, is not an error: the
// result's Released is false and nothing is restored.
func (c *Client) ReleaseLease(ctx context.Context, id string) (ReleaseResult, error) {
	lid, err := store.ParseLeaseID(id)
	if err != nil {
		return ReleaseResult{}, err
	}
	req := store.ReleaseRequest{Now: c.clock.Now(), ID: lid, Op: store.NewLeaseID()}
	res, err := storeCall(ctx, c, "release", func(ctx context.Context) (store.ReleaseResult, error) {
		req.Now = c.clock.Now()
		return c.st.Release(ctx, req)
	})
	if o := c.obs; o != nil && o.Released != nil {
		o.Released(ctx, ReleaseEvent{Lease: id, Recorded: true, Released: res.Released, Err: err})
	}
	if err != nil {
		return ReleaseResult{}, err
	}
	c.freedRestored(res.Restored)
	if c.log.Enabled(ctx, slog.LevelDebug) && res.Released {
		c.log.LogAttrs(ctx, slog.LevelDebug, "release.ok", slog.String("lease", id))
	}
	return ReleaseResult{Released: res.Released, Restored: res.Restored}, nil
}

// ExtendLease moves the recorded lease id's expiry to ttl from now and
// returns the new expiry (see Lease.Extend). It fails with
// ErrLeaseExpired when the lease has expired or was reclaimed.
func (c *Client) ExtendLease(ctx context.Context, id string, ttl time.Duration) (time.Time, error) {
	lid, err := store.ParseLeaseID(id)
	if err != nil {
		return time.Time{}, err
	}
	if err := contract.TTL(ttl); err != nil {
		return time.Time{}, err
	}
	req := store.ExtendRequest{Now: c.clock.Now(), ID: lid, TTL: ttl}
	exp, err := storeCall(ctx, c, "extend", func(ctx context.Context) (time.Time, error) {
		return c.st.Extend(ctx, req)
	})
	if errors.Is(err, store.ErrUnknownLease) {
		return time.Time{}, &leaseError{id: lid, op: "extend", err: store.ErrLeaseExpired, why: "is unknown: released, reclaimed by the reconciler after it expired, or lost by the store (a restart without persistence or a failover)"}
	}
	return exp, err
}

// AdjustLease charges (delta > 0) or refunds (delta < 0) delta tokens on
// one dimension of the recorded lease id (see Lease.Adjust). A refund is
// bounded by the lease's recorded cost and refused once it has expired.
func (c *Client) AdjustLease(ctx context.Context, id, dimension string, delta int64) (Settlement, error) {
	lid, err := store.ParseLeaseID(id)
	if err != nil {
		return Settlement{}, err
	}
	req := store.AdjustRequest{Now: c.clock.Now(), ID: lid, Recorded: true, Dimension: dimension, Delta: delta, Op: store.NewLeaseID()}
	res, err := c.storeAdjust(ctx, req)
	if errors.Is(err, store.ErrUnknownLease) {
		err = &leaseError{id: lid, op: "adjust", err: store.ErrLeaseExpired, why: "is unknown: released, reclaimed by the reconciler after it expired, or lost by the store (a restart without persistence or a failover)"}
	}
	before := res.Held - delta // the cost the record held before
	if delta > 0 {
		before = res.Held - res.Applied/1000
	}
	c.settled(ctx, dimension, before, res, false, err)
	if err != nil {
		return Settlement{}, err
	}
	return settlement(res), nil
}

// SettleLease settles the recorded lease id's estimate on dimension: the
// holder reserved estimate tokens and the vendor reported actual, so the
// difference is charged or refunded (see Lease.Settle).
func (c *Client) SettleLease(ctx context.Context, id, dimension string, estimate, actual int64) (Settlement, error) {
	if actual < 0 {
		return Settlement{}, invalid("actual["+dimension+"]", actual, "must not be negative")
	}
	if estimate < 0 {
		return Settlement{}, invalid("estimate["+dimension+"]", estimate, "must not be negative")
	}
	if actual == estimate {
		return Settlement{Held: actual}, nil
	}
	return c.AdjustLease(ctx, id, dimension, actual-estimate)
}

// Reconcile runs one reconcile batch: it returns the cost of up to
// opts.Limit expired concurrent leases to their buckets (never above
// capacity) and deletes the expired records, as the reconciler does. It
// is idempotent and safe to run from several processes at once. Package
// reconcile runs batches on a schedule.
func (c *Client) Reconcile(ctx context.Context, opts ReconcileOptions) (ReconcileResult, error) {
	if opts.Limit < 0 {
		return ReconcileResult{}, invalid("limit", opts.Limit, "must not be negative (0 means 1000)")
	}
	var start time.Time
	if c.obs != nil && c.obs.Reconciled != nil {
		start = time.Now()
	}
	req := store.ReconcileRequest{Now: c.clock.Now(), Limit: opts.Limit}
	res, err := storeCall(ctx, c, "reconcile", func(ctx context.Context) (store.ReconcileResult, error) {
		return c.st.Reconcile(ctx, req)
	})
	if !start.IsZero() {
		c.obs.Reconciled(ctx, ReconcileEvent{
			Restored: res.Restored, Reclaimed: res.Reclaimed, AlreadyCapped: res.AlreadyCapped,
			Orphans: res.Orphans, Duration: time.Since(start), Err: err,
		})
	}
	if err != nil {
		return ReconcileResult{}, err
	}
	if res.Reclaimed > 0 {
		items := make([]store.Item, len(res.Dimensions))
		for i, d := range res.Dimensions {
			items[i].Dimension = d
		}
		c.freed(items)
	}
	return ReconcileResult{
		Processed: res.Restored, Reclaimed: res.Reclaimed, AlreadyCapped: res.AlreadyCapped,
		Orphans: res.Orphans, Dimensions: res.Dimensions, More: res.More,
	}, nil
}
