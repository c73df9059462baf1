package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// scanBuckets reads the rows of the peek and list queries. Read-only
// operations align and refill in Go with package bucket, which the
// differential test proves equal to the SQL port. It returns the first
// requested name that has no bucket, if any.
func (s *Store) scanBuckets(rows pgx.Rows, hint int) ([]store.BucketState, string, error) {
	defer rows.Close()
	out := make([]store.BucketState, 0, hint)
	for rows.Next() {
		var (
			nowMs                           int64
			asked                           string
			name                            *string
			typ                             *int16
			capacity, amount, period, cpc   *int64
			debt, tokens, last, nLeases, nx *int64
		)
		if err := rows.Scan(&nowMs, &asked, &name, &typ, &capacity, &amount, &period, &cpc, &debt, &tokens, &last, &nLeases, &nx); err != nil {
			return nil, "", err
		}
		if name == nil {
			return nil, asked, nil
		}
		b := store.Bucket{Name: *name, Config: bucket.Config{
			Type: bucket.LimitType(*typ), Capacity: *capacity, RefillAmount: *amount,
			RefillPeriod: time.Duration(*period) * time.Millisecond, CostPerCall: *cpc, MaxDebt: *debt,
		}}
		lim := b.Config.Limits()
		st, at := bucket.Align(lim, bucket.State{Tokens: *tokens, Last: *last}, nowMs, s.skewMs())
		r := bucket.Refill(lim, st, at)
		bs := store.BucketState{Bucket: b, Tokens: r.Tokens, LastRefill: r.Last, ActiveLeases: int(deref(nLeases)), Now: time.UnixMilli(nowMs)}
		if nx != nil {
			bs.NextExpiry = time.UnixMilli(*nx)
		}
		out = append(out, bs)
	}
	return out, "", rows.Err()
}

// Peek implements store.Store in one read-only statement.
func (s *Store) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	dimensions := req.Dimensions
	rows, err := s.pool.Query(ctx, s.q.peek, s.now(req.Now), dimensions)
	if err != nil {
		return nil, fail("peek", err)
	}
	out, missing, err := s.scanBuckets(rows, len(dimensions))
	if err != nil {
		return nil, fail("peek", err)
	}
	if missing != "" {
		return nil, &store.ConfigurationError{Dimension: missing}
	}
	return out, nil
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

// Leases implements store.Store in one read-only statement.
func (s *Store) Leases(ctx context.Context, q store.LeaseQuery) ([]store.LeaseRecord, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	ms := s.now(q.Now)
	if !sendable(q.Dimension) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.leases, ms, q.ExpiredOnly, q.Dimension, int64(max(q.Limit, 0)))
	if err != nil {
		return nil, fail("leases", err)
	}
	defer rows.Close()
	var out []store.LeaseRecord
	for rows.Next() {
		var (
			id               pgtype.UUID
			dims             []string
			costs            []int64
			caller           string
			created, expires int64
		)
		if err := rows.Scan(&id, &dims, &costs, &caller, &created, &expires); err != nil {
			return nil, fail("leases", err)
		}
		l := store.LeaseRecord{ID: store.LeaseID(id.Bytes), Caller: caller,
			CreatedAt: time.UnixMilli(created), ExpiresAt: time.UnixMilli(expires), Items: make([]store.Item, len(dims))}
		for i := range dims {
			l.Items[i] = store.Item{Dimension: dims[i], Cost: costs[i]}
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("leases", err)
	}
	return out, nil
}

// PutBucket implements store.Store in one call of the put_bucket function.
func (s *Store) PutBucket(ctx context.Context, req store.PutBucketRequest) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	b := req.Bucket
	var old *int16
	err = s.pool.QueryRow(ctx, s.q.put, b.Name, int16(b.Type), b.Capacity, b.RefillAmount,
		b.RefillPeriod.Milliseconds(), b.CostPerCall, b.MaxDebt, s.now(req.Now), req.Reset, s.skewMs()).Scan(&old)
	if err != nil {
		return fail("put bucket", err)
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

// Reconcile implements store.Store in one call of the reconcile function,
// which takes its batch with FOR UPDATE SKIP LOCKED: concurrent reconcilers
// split the expired records between them instead of waiting, and a record
// is restored by exactly one of them (or by Release).
func (s *Store) Reconcile(ctx context.Context, req store.ReconcileRequest) (store.ReconcileResult, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.ReconcileResult{}, err
	}
	var res store.ReconcileResult
	var dims []string
	err = s.pool.QueryRow(ctx, s.q.reconcile, s.now(req.Now), int32(min(req.Limit, 1<<30))).
		Scan(&res.Restored, &res.Reclaimed, &res.AlreadyCapped, &res.Orphans, &dims, &res.More)
	if err != nil {
		return store.ReconcileResult{}, fail("reconcile", err)
	}
	if len(dims) > 0 {
		slices.Sort(dims)
		res.Dimensions = dims
	}
	return res, nil
}

// sendable reports whether PostgreSQL can hold name as text: valid UTF-8
// without NUL. A name that is not can have no bucket (PutBucket validates
// names), so the store never sends it.
func sendable(name string) bool {
	return utf8.ValidString(name) && !strings.ContainsRune(name, 0)
}
