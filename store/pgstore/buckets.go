package pgstore

import (
	"context"
	"fmt"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// PutBucket implements store.Store in one call of the put_bucket function.
func (s *Store) PutBucket(ctx context.Context, req store.PutBucketRequest) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	b := req.Bucket
	var old *int16
	args := []any{b.Name, int16(b.Type), b.Capacity, b.RefillAmount,
		b.RefillPeriod.Milliseconds(), b.CostPerCall, b.MaxDebt, s.now(req.Now), req.Reset, s.skewMs()}
	switch {
	case req.Empty:
		// Version 10's put_bucket_if; a schema not yet migrated creates
		// the bucket full, as before (run Migrate).
		err = s.pool.QueryRow(ctx, s.q.putEmpty, append(args, append(putCondition(req), true)...)...).Scan(&old)
		if undefinedFunction(err) {
			err = s.pool.QueryRow(ctx, s.q.putIf, append(args, putCondition(req)...)...).Scan(&old)
		}
	case req.IfAbsent || req.IfMatch != nil:
		err = s.pool.QueryRow(ctx, s.q.putIf, append(args, putCondition(req)...)...).Scan(&old)
	default:
		err = s.pool.QueryRow(ctx, s.q.put, args...).Scan(&old)
	}
	if err != nil {
		return fail("put bucket", err)
	}
	if old != nil && *old < 0 { // the condition failed
		return &store.ConflictError{Dimension: b.Name, Found: *old == -2}
	}
	if old != nil { // the function refused a change of limit type
		if err := store.CheckTypeChange(store.Bucket{Name: b.Name, Config: bucket.Config{Type: bucket.LimitType(*old)}}, b); err != nil {
			return err
		}
		return fmt.Errorf("pgstore: put bucket %q: change from limit type %d refused", b.Name, *old)
	}
	return nil
}

// DeleteBucket implements store.Store in one statement. The bucket's lease
// records stay behind as orphans for Reconcile.
func (s *Store) DeleteBucket(ctx context.Context, req store.DeleteBucketRequest) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, s.q.del, req.Name)
	if err != nil {
		return fail("delete bucket", err)
	}
	if tag.RowsAffected() == 0 {
		return &store.ConfigurationError{Dimension: req.Name}
	}
	return nil
}

// ListBuckets implements store.Store in one read-only statement.
func (s *Store) ListBuckets(ctx context.Context, req store.ListBucketsRequest) ([]store.BucketState, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.list, s.now(req.Now))
	if err != nil {
		return nil, fail("list buckets", err)
	}
	out, _, err := s.scanBuckets(rows, 0)
	if err != nil {
		return nil, fail("list buckets", err)
	}
	return out, nil
}

// putCondition returns put_bucket_if's condition arguments for req: 0
// (none), 1 (create only) or 2 and the configuration to match
// (store.SameConfig).
func putCondition(req store.PutBucketRequest) []any {
	switch {
	case req.IfAbsent:
		return []any{int16(1), int16(0), int64(0), int64(0), int64(0), int64(0), int64(0)}
	case req.IfMatch == nil:
		return []any{int16(0), int16(0), int64(0), int64(0), int64(0), int64(0), int64(0)}
	}
	m := req.IfMatch
	l := m.Limits()
	return []any{int16(2), int16(m.Type), m.Capacity, m.RefillAmount, m.RefillPeriod.Milliseconds(), l.Floor, m.Cost()}
}
