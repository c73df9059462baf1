package sluice

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Bucket is a named bucket configuration: Name plus a bucket.Config
// (limit type, capacity, refill amount per period, cost per call and
// maximum debt), usually built with PerMinute, PerPeriod or
// ConcurrentLimit.
type Bucket = store.Bucket

// ConcurrentLimit returns a bucket config with n concurrent slots.
func ConcurrentLimit(n int64) bucket.Config { return bucket.ConcurrentSlots(n) }

// DefaultPenaltyFactor is the factor the Python and TypeScript SDKs apply
// after a vendor 429.
const DefaultPenaltyFactor = 0.8

// PutOption configures PutBucket.
type PutOption func(*putOptions)

type putOptions struct {
	reset     bool
	condition bool
	read      *bucket.Config
}

// ResetTokens makes PutBucket fill the bucket to capacity; without it an
// existing bucket keeps its live balance.
func ResetTokens() PutOption { return func(o *putOptions) { o.reset = true } }

// IfUnchanged makes PutBucket write only if the bucket is still as the
// caller read it: absent when read is nil (a creation that never refills a
// bucket another writer created meanwhile), else present with the
// configuration *read (the same limits and cost per call), so that a
// change made since the read is never undone. The check and the write are
// one atomic step in every store. When the bucket is not as read, nothing
// changes and the error is a *ConflictError matching ErrConflict: read the
// bucket again and decide again.
func IfUnchanged(read *bucket.Config) PutOption {
	return func(o *putOptions) {
		o.condition = true
		if read != nil {
			r := *read
			o.read = &r
		}
	}
}

// PutBucket creates or reconfigures a bucket. A new bucket starts full; an
// existing one keeps its balance (clamped to the new capacity) unless
// ResetTokens is given. IfUnchanged makes the write conditional.
func (c *Client) PutBucket(ctx context.Context, b Bucket, opts ...PutOption) error {
	var o putOptions
	for _, f := range opts {
		f(&o)
	}
	_, err := storeCallExpect(ctx, c, "put_bucket", func(ctx context.Context) (struct{}, error) {
		// Every attempt decides at its own time.
		req := store.PutBucketRequest{Now: c.clock.Now(), Bucket: b, Reset: o.reset,
			IfAbsent: o.condition && o.read == nil, IfMatch: o.read}
		return struct{}{}, c.st.PutBucket(ctx, req)
	}, isConflict)
	return err
}

// isConflict reports a conditional write's failed condition: an answer,
// not a store failure.
func isConflict(err error) bool { return errors.Is(err, store.ErrConflict) }

// GetBucket returns one bucket's state.
func (c *Client) GetBucket(ctx context.Context, name string) (BucketState, error) {
	s, err := c.Peek(ctx, name)
	if err != nil {
		return BucketState{}, err
	}
	return s[0], nil
}

// Buckets returns every bucket's state, sorted by name.
func (c *Client) Buckets(ctx context.Context) ([]BucketState, error) {
	now := c.clock.Now()
	s, err := storeCall(ctx, c, "list_buckets", func(ctx context.Context) ([]store.BucketState, error) {
		return c.st.ListBuckets(ctx, store.ListBucketsRequest{Now: now})
	})
	if err != nil {
		return nil, err
	}
	return bucketStates(s), nil
}

// DeleteBucket removes a bucket; its outstanding leases are cleaned up by
// the reconciler.
func (c *Client) DeleteBucket(ctx context.Context, name string) error {
	req := store.DeleteBucketRequest{Name: name}
	_, err := storeCall(ctx, c, "delete_bucket", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.st.DeleteBucket(ctx, req)
	})
	return err
}

// Leases lists the lease records q selects, sorted by expiry; expiry is
// judged against the client's clock.
func (c *Client) Leases(ctx context.Context, q LeaseQuery) ([]LeaseRecord, error) {
	sq := store.LeaseQuery{Now: c.clock.Now(), Dimension: q.Dimension, ExpiredOnly: q.ExpiredOnly, Limit: q.Limit}
	ls, err := storeCall(ctx, c, "leases", func(ctx context.Context) ([]store.LeaseRecord, error) {
		return c.st.Leases(ctx, sq)
	})
	if err != nil {
		return nil, err
	}
	out := make([]LeaseRecord, len(ls))
	for i, l := range ls {
		out[i] = leaseRecord(l)
	}
	return out, nil
}

// Peek returns the current state of dimensions, in the order asked,
// without consuming anything.
func (c *Client) Peek(ctx context.Context, dimensions ...string) ([]BucketState, error) {
	req := store.PeekRequest{Now: c.clock.Now(), Dimensions: dimensions}
	s, err := storeCall(ctx, c, "peek", func(ctx context.Context) ([]store.BucketState, error) {
		return c.st.Peek(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	return bucketStates(s), nil
}

// TimeUntil returns how long after s.Now the bucket will hold n tokens and
// grant them if nothing else changes it: 0 if it already would; during a
// cooldown, at least the time to its end; for a concurrent bucket, the
// time until its next lease expiry (a hint), or -1 if no lease is due to
// free a slot.
func TimeUntil(s BucketState, n int64) time.Duration {
	l := s.Config.Limits()
	need := n * bucket.Milli
	if l.Amount == 0 {
		switch {
		case int64(s.Tokens) >= need:
			return 0
		case s.NextExpiry.After(s.Now):
			return s.NextExpiry.Sub(s.Now)
		}
		return -1
	}
	st := bucket.State{Tokens: int64(s.Tokens), Last: s.LastRefill.UnixMilli()}
	if !s.CooldownUntil.IsZero() {
		st.Until = s.CooldownUntil.UnixMilli()
	}
	ms := bucket.RetryIn(l, st, s.Now.UnixMilli(), need)
	return time.Duration(ms) * time.Millisecond
}

// Penalize multiplies dimension's available tokens by factor (0..1, in
// steps of 0.001; use DefaultPenaltyFactor after a vendor 429) in one
// atomic, versioned write.
func (c *Client) Penalize(ctx context.Context, dimension string, factor float64) (Penalty, error) {
	fm, err := factorMilli(factor)
	if err != nil {
		return Penalty{}, err
	}
	req := store.PenalizeRequest{Now: c.clock.Now(), Dimension: dimension, FactorMilli: fm, Op: store.NewLeaseID()}
	res, err := storeCall(ctx, c, "penalize", func(ctx context.Context) (store.Penalty, error) {
		req.Now = c.clock.Now() // every attempt decides at its own time
		return c.st.Penalize(ctx, req)
	})
	p := Penalty{Before: Millitokens(res.Before), After: Millitokens(res.After)}
	if o := c.obs; o != nil && o.Penalized != nil {
		o.Penalized(ctx, PenaltyEvent{Dimension: dimension, Factor: factor, Before: res.Before, After: res.After, Err: err})
	}
	if err != nil {
		return Penalty{}, err
	}
	if c.log.Enabled(ctx, slog.LevelInfo) {
		c.log.LogAttrs(ctx, slog.LevelInfo, "penalize.applied", slog.String("dimension", dimension),
			slog.Float64("factor", factor), slog.Int64("tokens_before_milli", res.Before), slog.Int64("tokens_after_milli", res.After))
	}
	return p, nil
}

// factorMilli converts a penalty factor to the thousandths the store
// applies. A factor finer than 0.001 is rejected rather than rounded, so
// that what is applied is what was asked for.
func factorMilli(factor float64) (int64, error) {
	if math.IsNaN(factor) || factor < 0 || factor > 1 {
		return 0, invalid("factor", factor, "must be between 0 and 1")
	}
	m := factor * 1000
	r := math.Round(m)
	if math.Abs(m-r) > 1e-6 {
		return 0, invalid("factor", factor, "must be a multiple of 0.001 (factors are applied in thousandths)")
	}
	return int64(r), nil
}
