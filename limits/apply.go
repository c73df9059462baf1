package limits

import (
	"context"
	"errors"
	"fmt"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store"
)

// ApplyOption changes what Apply does.
type ApplyOption func(*applyOptions)

type applyOptions struct {
	reset, prune bool
}

// WithReset refills every declared bucket to capacity, as
// `sluice limits apply --reset` does: an operator's action, never one for
// a service's start-up (see the package documentation).
func WithReset() ApplyOption { return func(o *applyOptions) { o.reset = true } }

// WithPrune deletes the buckets in the store that the file does not
// declare, as `sluice limits apply --prune` does. Without it they are left
// alone (Unmanaged).
func WithPrune() ApplyOption { return func(o *applyOptions) { o.prune = true } }

// maxReplans bounds how many times Apply reads the store again after
// another writer changed a bucket under it.
const maxReplans = 5

// Apply brings the buckets of c's store in line with f: it plans (see
// Plan) against the buckets in the store now, then creates, updates, resets
// or deletes bucket by bucket through c.PutBucket and c.DeleteBucket,
// keeping live balances unless WithReset. It returns the changes it made,
// in dimension order; on an error it stops and returns the changes made
// before it, with an error naming the action and the dimension. Applying
// the same file again changes nothing.
//
// Every write is conditional on what the plan read (sluice.IfUnchanged): a
// creation happens only if the bucket is still missing, an update or reset
// only if the bucket still has the configuration read. So replicas that
// start together and apply the same file at once never refill a bucket one
// of them created and callers already spent from, and never undo another
// writer's change unseen. When a bucket changed since the plan read it,
// Apply reads the store again and plans the rest anew (a bucket another
// replica just created as the file says is then unchanged); a bucket it
// already wrote is not written again. After 5 such re-plans it gives up
// with an error matching sluice.ErrConflict.
func Apply(ctx context.Context, c *sluice.Client, f *File, opts ...ApplyOption) ([]Change, error) {
	var o applyOptions
	for _, opt := range opts {
		opt(&o)
	}
	var done []Change
	written := map[string]bool{}
	for replan := 0; ; replan++ {
		plan, err := planNow(ctx, c, f, o)
		if err != nil {
			return done, err
		}
		conflict, err := applyPlan(ctx, c, plan, written, &done)
		if err != nil {
			return done, err
		}
		if conflict == nil {
			sortChanges(done)
			return done, nil
		}
		if replan >= maxReplans {
			sortChanges(done)
			return done, fmt.Errorf("limits: %s %s (after %d change(s)): the bucket kept changing under this apply (%d re-plans); another writer is applying other limits: %w",
				conflict.Action, conflict.Dimension, len(done), maxReplans, sluice.ErrConflict)
		}
	}
}

// planNow reads the store's buckets and plans f against them.
func planNow(ctx context.Context, c *sluice.Client, f *File, o applyOptions) ([]Change, error) {
	states, err := c.Buckets(ctx)
	if err != nil {
		return nil, fmt.Errorf("limits: reading the store's buckets: %w", err)
	}
	current := make([]store.BucketState, len(states))
	for i, b := range states {
		current[i] = store.BucketState{Bucket: b.Bucket, Tokens: int64(b.Tokens), LastRefill: b.LastRefill.UnixMilli(),
			ActiveLeases: b.ActiveLeases, NextExpiry: b.NextExpiry, Now: b.Now}
	}
	return Plan(f, current, o.reset, o.prune), nil
}

// applyPlan makes plan's changes, skipping the dimensions already written,
// and appends each one made to done. It stops at the first change whose
// bucket changed since the plan read it and returns that change.
func applyPlan(ctx context.Context, c *sluice.Client, plan []Change, written map[string]bool, done *[]Change) (*Change, error) {
	for i := range plan {
		ch := &plan[i]
		if written[ch.Dimension] {
			continue
		}
		var err error
		switch ch.Action {
		case Create:
			// A new bucket starts full; nothing to reset.
			err = c.PutBucket(ctx, ch.Bucket, sluice.IfUnchanged(nil))
		case Update, Reset:
			put := []sluice.PutOption{sluice.IfUnchanged(&ch.read)}
			if ch.Reset {
				put = append(put, sluice.ResetTokens())
			}
			err = c.PutBucket(ctx, ch.Bucket, put...)
		case Delete:
			err = c.DeleteBucket(ctx, ch.Dimension)
		default:
			continue
		}
		if errors.Is(err, sluice.ErrConflict) {
			return ch, nil
		}
		if err != nil {
			return nil, fmt.Errorf("limits: %s %s (after %d change(s)): %w", ch.Action, ch.Dimension, len(*done), err)
		}
		written[ch.Dimension] = true
		*done = append(*done, *ch)
	}
	return nil, nil
}
