package sluice

import (
	"context"
	"log/slog"
	"time"

	"github.com/ontopix/sluice/store"
)

// ReleaseLease acts on a recorded lease by its id, so that another process
// than the holder (an admin tool) can end it. A lease that was never
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
