package limits

import (
	"context"
	"fmt"
	"github.com/ontopix/sluice/store"

	"github.com/ontopix/sluice"
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

// Apply brings the buckets of c's store in line with f: it plans (see
// Plan) against the buckets in the store now, then creates, updates, resets
// or deletes bucket by bucket through c.PutBucket and c.DeleteBucket,
// keeping live balances unless WithReset. It returns the changes it made,
// in dimension order; on an error it stops and returns the changes made
// before it, with an error naming the action and the dimension. Applying
// the same file again changes nothing.
func Apply(ctx context.Context, c *sluice.Client, f *File, opts ...ApplyOption) ([]Change, error) {
	var o applyOptions
	for _, opt := range opts {
		opt(&o)
	}
	states, err := c.Buckets(ctx)
	if err != nil {
		return nil, fmt.Errorf("limits: reading the store's buckets: %w", err)
	}
	current := make([]store.BucketState, len(states))
	for i, b := range states {
		current[i] = store.BucketState{Bucket: b.Bucket, Tokens: int64(b.Tokens), LastRefill: b.LastRefill.UnixMilli(),
			ActiveLeases: b.ActiveLeases, NextExpiry: b.NextExpiry, Now: b.Now}
	}
	var done []Change
	for _, ch := range Plan(f, current, o.reset, o.prune) {
		switch ch.Action {
		case Create, Update, Reset:
			var put []sluice.PutOption
			if ch.Reset {
				put = append(put, sluice.ResetTokens())
			}
			err = c.PutBucket(ctx, ch.Bucket, put...)
		case Delete:
			err = c.DeleteBucket(ctx, ch.Dimension)
		default:
			continue
		}
		if err != nil {
			return done, fmt.Errorf("limits: %s %s (after %d change(s)): %w", ch.Action, ch.Dimension, len(done), err)
		}
		done = append(done, ch)
	}
	return done, nil
}
