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
	q := s.q.put
	if req.IfAbsent || req.IfMatch != nil {
		q, args = s.q.putIf, append(args, putCondition(req)...)
	}
	err = s.pool.QueryRow(ctx, q, args...).Scan(&old)
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

// putCondition returns put_bucket_if's condition arguments for req: 1
// (create only) or 2 and the configuration to match (store.SameConfig).
func putCondition(req store.PutBucketRequest) []any {
	if req.IfAbsent {
		return []any{int16(1), int16(0), int64(0), int64(0), int64(0), int64(0), int64(0)}
	}
	m := req.IfMatch
	l := m.Limits()
	return []any{int16(2), int16(m.Type), m.Capacity, m.RefillAmount, m.RefillPeriod.Milliseconds(), l.Floor, m.Cost()}
}
