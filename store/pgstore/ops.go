package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// queries holds every statement, with the schema name filled in.
type queries struct {
	acquire, release, extend, adjust, penalize, put, del, reconcile string
	peek, list, leases                                              string
}

func newQueries(sch string) queries {
	// bucketCols are the columns bucketState scans, followed by the lease
	// count and earliest expiry of each bucket. Only leases granted on this
	// incarnation of the bucket count: those of a deleted bucket re-created
	// under the same name are orphans.
	const bucketCols = `b.name, b.limit_type, b.capacity, b.refill_amount, b.refill_period_ms, b.cost_per_call,
		b.max_debt, b.tokens, b.last_refill_ms, x.n, x.next`
	leaseAgg := `LEFT JOIN LATERAL (SELECT count(*) AS n, min(l.expires_ms) AS next FROM ` + sch +
		`.leases l WHERE l.dims @> ARRAY[b.name] AND l.incs[array_position(l.dims, b.name)] = b.incarnation) x ON b.name IS NOT NULL`
	now := `(SELECT coalesce($1::bigint, ` + sch + `.now_ms()) AS ms) t`
	return queries{
		acquire:   `SELECT * FROM ` + sch + `.acquire($1::text[], $2::bigint[], $3::bigint, $4::bigint, $5::uuid, $6::text, $7::boolean, $8::bigint, $9::bigint)`,
		release:   `SELECT * FROM ` + sch + `.release($1::uuid)`,
		extend:    `SELECT * FROM ` + sch + `.extend($1::uuid, $2::bigint, $3::bigint)`,
		adjust:    `SELECT * FROM ` + sch + `.adjust($1::text, $2::bigint, $3::bigint, $4::uuid, $5::boolean, $6::bigint, $7::bigint, $8::bigint)`,
		penalize:  `SELECT * FROM ` + sch + `.penalize($1::text, $2::bigint, $3::bigint, $4::bigint)`,
		put:       `SELECT ` + sch + `.put_bucket($1::text, $2::smallint, $3::bigint, $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::bigint, $9::boolean, $10::bigint)`,
		del:       `DELETE FROM ` + sch + `.buckets WHERE name = $1::text`,
		reconcile: `SELECT * FROM ` + sch + `.reconcile($1::bigint, $2::int)`,
		peek: `SELECT t.ms, u.name, ` + bucketCols + ` FROM ` + now + ` CROSS JOIN unnest($2::text[]) WITH ORDINALITY AS u(name, ord)
			LEFT JOIN ` + sch + `.buckets b ON b.name = u.name ` + leaseAgg + ` ORDER BY u.ord`,
		list: `SELECT t.ms, b.name, ` + bucketCols + ` FROM ` + now + ` CROSS JOIN ` + sch + `.buckets b ` + leaseAgg + ` ORDER BY b.name`,
		leases: `SELECT l.id, l.dims, l.costs, l.caller, l.created_ms, l.expires_ms FROM ` + now + ` CROSS JOIN ` + sch + `.leases l
			WHERE (NOT $2::boolean OR l.expires_ms <= t.ms) AND ($3::text = '' OR l.dims @> ARRAY[$3::text])
			ORDER BY l.expires_ms, l.id LIMIT NULLIF($4::bigint, 0)`,
	}
}

func uuidOf(id store.LeaseID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

// Acquire implements store.Store in one call of the acquire function.
func (s *Store) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	now := s.now(req.Now)
	n := len(req.Items)
	var dimsBuf [store.MaxItems]string
	var costsBuf [store.MaxItems]int64
	dims, costs := dimsBuf[:n], costsBuf[:n]
	for i, it := range req.Items {
		dims[i], costs[i] = it.Dimension, it.Cost
	}
	poll := req.Poll
	var (
		errCode, errDim             *string
		granted, recorded           *bool
		nowMs, retry, expires       *int64
		types                       []int16
		rcosts, caps, remain, waits []int64
	)
	err = s.pool.QueryRow(ctx, s.q.acquire, dims, costs, now, req.TTL.Milliseconds(), uuidOf(req.ID),
		req.Caller, req.Record, poll.Milliseconds(), s.skewMs()).
		Scan(&errCode, &errDim, &granted, &recorded, &nowMs, &retry, &types, &rcosts, &caps, &remain, &waits, &expires)
	if err != nil {
		return fail("acquire", err)
	}
	if errCode != nil {
		return acquireError(req, *errCode, deref(errDim), rcosts, caps)
	}
	if len(types) != n || len(rcosts) != n || len(caps) != n || len(remain) != n || len(waits) != n || granted == nil || recorded == nil {
		return fmt.Errorf("pgstore: acquire: malformed result for %d items (schema older than this code? run Migrate)", n)
	}
	if cap(res.Items) >= n {
		res.Items = res.Items[:n]
	} else {
		res.Items = make([]store.ItemResult, n)
	}
	for i := range res.Items {
		res.Items[i] = store.ItemResult{
			Dimension: req.Items[i].Dimension, Type: bucket.LimitType(types[i]), Cost: rcosts[i],
			Capacity: caps[i], Remaining: remain[i], RetryIn: time.Duration(waits[i]) * time.Millisecond,
		}
	}
	res.Granted, res.Recorded = *granted, *recorded
	res.RetryIn, res.ExpiresAt = 0, time.Time{}
	if !res.Granted {
		res.RetryIn = time.Duration(*retry) * time.Millisecond
		return nil
	}
	res.ExpiresAt = time.UnixMilli(*expires)
	return nil
}

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

func indexOf(req *store.AcquireRequest, dim string) int {
	for i, it := range req.Items {
		if it.Dimension == dim {
			return i
		}
	}
	return -1
}

// acquireError turns the acquire function's error code into the contract's
// error.
func acquireError(req *store.AcquireRequest, code, dim string, costs, caps []int64) error {
	switch code {
	case "unknown":
		return &store.ConfigurationError{Dimension: dim}
	case "cost":
		if i := indexOf(req, dim); i >= 0 && i < len(costs) && i < len(caps) {
			return &store.CostError{Dimension: dim, Cost: costs[i], Capacity: caps[i]}
		}
	case "inuse":
		return store.LeaseInUse(req.ID)
	}
	return fmt.Errorf("pgstore: acquire: unexpected result %q for %q", code, dim)
}

// Release implements store.Store in one call of the release function.
func (s *Store) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.ReleaseResult{}, err
	}
	var released bool
	var dims []string
	var costs []int64
	var capped []bool
	if err := s.pool.QueryRow(ctx, s.q.release, uuidOf(req.ID)).Scan(&released, &dims, &costs, &capped); err != nil {
		return store.ReleaseResult{}, fail("release", err)
	}
	if !released {
		return store.ReleaseResult{}, nil
	}
	res := store.ReleaseResult{Released: true}
	for i := range dims {
		res.Restored = append(res.Restored, store.Restored{Dimension: dims[i], Cost: costs[i], Capped: capped[i]})
	}
	return res, nil
}

// Extend implements store.Store in one call of the extend function.
func (s *Store) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return time.Time{}, err
	}
	now := s.now(req.Now)
	var status int
	var exp *int64
	if err := s.pool.QueryRow(ctx, s.q.extend, uuidOf(req.ID), now, req.TTL.Milliseconds()).Scan(&status, &exp); err != nil {
		return time.Time{}, fail("extend", err)
	}
	switch status {
	case 1:
		return time.Time{}, store.ErrUnknownLease
	case 2:
		return time.Time{}, store.ErrLeaseExpired
	}
	return time.UnixMilli(*exp), nil
}

// Adjust implements store.Store in one call of the adjust function.
func (s *Store) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.Settlement{}, err
	}
	now := s.now(req.Now)
	var expires *int64
	if !req.Recorded && !req.ExpiresAt.IsZero() {
		ms := req.ExpiresAt.UnixMilli()
		expires = &ms
	}
	var code *string
	var held, applied, remaining *int64
	err = s.pool.QueryRow(ctx, s.q.adjust, req.Dimension, req.Delta, now, uuidOf(req.ID), req.Recorded, req.Held, expires, s.skewMs()).
		Scan(&code, &held, &applied, &remaining)
	if err != nil {
		return store.Settlement{}, fail("adjust", err)
	}
	if code != nil {
		switch *code {
		case "unknown":
			return store.Settlement{}, &store.ConfigurationError{Dimension: req.Dimension}
		case "concurrent":
			return store.Settlement{}, (&store.Bucket{Name: req.Dimension, Config: bucket.Config{Type: bucket.Concurrent}}).CheckAdjustable()
		case "nolease":
			return store.Settlement{}, store.ErrUnknownLease
		case "expired":
			return store.Settlement{}, store.ErrLeaseExpired
		case "notinlease":
			return store.Settlement{}, &bucket.FieldError{Field: "dimension", Value: req.Dimension, Reason: "is not part of lease " + req.ID.String()}
		case "refund":
			_, err := store.AdjustHeld(req.Dimension, deref(held), req.Delta)
			if err == nil {
				err = fmt.Errorf("pgstore: adjust: refund of %d refused with %d held", -req.Delta, deref(held))
			}
			return store.Settlement{}, err
		}
		return store.Settlement{}, fmt.Errorf("pgstore: adjust: unexpected result %q", *code)
	}
	return store.Settlement{Held: *held, Applied: *applied, Remaining: *remaining}, nil
}

// Penalize implements store.Store in one call of the penalize function.
func (s *Store) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.Penalty{}, err
	}
	now := s.now(req.Now)
	var code *string
	var before, after *int64
	if err := s.pool.QueryRow(ctx, s.q.penalize, req.Dimension, now, req.FactorMilli, s.skewMs()).Scan(&code, &before, &after); err != nil {
		return store.Penalty{}, fail("penalize", err)
	}
	if code != nil {
		switch *code {
		case "unknown":
			return store.Penalty{}, &store.ConfigurationError{Dimension: req.Dimension}
		case "concurrent":
			return store.Penalty{}, (&store.Bucket{Name: req.Dimension, Config: bucket.Config{Type: bucket.Concurrent}}).CheckPenalizable()
		}
		return store.Penalty{}, fmt.Errorf("pgstore: penalize: unexpected result %q", *code)
	}
	return store.Penalty{Before: *before, After: *after}, nil
}
