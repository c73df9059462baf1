package pgstore

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// queries holds every statement, with the schema name filled in.
type queries struct {
	acquire, release, extend, adjust, penalize, cooldown, sync, put, del, reconcile string
	acquire3                                                                        string // version 3's, for a schema not yet migrated
	reserve, cancel, dequeue                                                        string
	peek, list, leases                                                              string
	// putIf is a conditional put (version 8's put_bucket_if); putEmpty is
	// version 10's, which also creates a missing bucket empty.
	putIf, putEmpty string
}

func newQueries(sch string) queries {
	// notify sends a notice of freed units (see Store.WatchFreed) for
	// each dimension of the text array it is given, in the statement's
	// own transaction: it is delivered when the statement commits.
	notify := func(dims string) string {
		return `(SELECT count(pg_notify(` + quoteLiteral(freedChannel(sch)) + `, d)) FROM unnest(` + dims + `) d)`
	}
	// bucketCols are the columns bucketState scans, followed by the lease
	// count and earliest expiry of each bucket and the live tickets of its
	// waiter queue. Only leases granted on this incarnation of the bucket
	// count: those of a deleted bucket re-created under the same name are
	// orphans.
	const bucketCols = `b.name, b.limit_type, b.capacity, b.refill_amount, b.refill_period_ms, b.cost_per_call,
		b.max_debt, b.tokens, b.last_refill_ms, b.cooldown_until_ms, b.reserved_until_ms, x.n, x.next, q.n,
		b.charged`
	leaseAgg := `LEFT JOIN LATERAL (SELECT count(*) AS n, min(l.expires_ms) AS next FROM ` + sch +
		`.leases l WHERE l.dims @> ARRAY[b.name] AND l.incs[array_position(l.dims, b.name)] = b.incarnation) x ON b.name IS NOT NULL
		LEFT JOIN LATERAL (SELECT count(*) AS n FROM ` + sch + `.waiters w WHERE w.dim = b.name AND w.expires_ms > t.ms) q ON b.name IS NOT NULL`
	now := `(SELECT coalesce($1::bigint, ` + sch + `.now_ms()) AS ms) t`
	return queries{
		acquire:  `SELECT * FROM ` + sch + `.acquire($1::text[], $2::bigint[], $3::bigint, $4::bigint, $5::uuid, $6::text, $7::boolean, $8::bigint, $9::bigint, $10::bigint)`,
		acquire3: `SELECT * FROM ` + sch + `.acquire($1::text[], $2::bigint[], $3::bigint, $4::bigint, $5::uuid, $6::text, $7::boolean, $8::bigint, $9::bigint)`,
		reserve:  `SELECT * FROM ` + sch + `.reserve_charged($1::text[], $2::bigint[], $3::bigint, $4::bigint, $5::uuid, $6::text, $7::boolean, $8::bigint, $9::bigint)`,
		cancel:   `SELECT * FROM ` + sch + `.cancel($1::uuid, $2::boolean, $3::text[], $4::bigint[], $5::bigint, $6::bigint, $7::bigint)`,
		dequeue:  `SELECT ` + sch + `.dequeue($1::text[], $2::uuid, $3::bigint), ` + notify(`$1::text[]`),
		release:  `SELECT r.o_released, r.o_dims, r.o_costs, r.o_capped, ` + notify(`r.o_dims`) + ` FROM ` + sch + `.release($1::uuid) r`,
		extend:   `SELECT * FROM ` + sch + `.extend($1::uuid, $2::bigint, $3::bigint)`,
		adjust:   `SELECT * FROM ` + sch + `.adjust($1::text, $2::bigint, $3::bigint, $4::uuid, $5::boolean, $6::bigint, $7::bigint, $8::bigint)`,
		penalize: `SELECT * FROM ` + sch + `.penalize($1::text, $2::bigint, $3::bigint, $4::bigint)`,
		cooldown: `SELECT * FROM ` + sch + `.cooldown($1::text, $2::bigint, $3::bigint, $4::bigint)`,
		sync:     `SELECT * FROM ` + sch + `.sync($1::text, $2::bigint, $3::bigint, $4::bigint)`,
		put:      `SELECT ` + sch + `.put_bucket($1::text, $2::smallint, $3::bigint, $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::bigint, $9::boolean, $10::bigint)`,
		putIf: `SELECT ` + sch + `.put_bucket_if($1::text, $2::smallint, $3::bigint, $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::bigint, $9::boolean, $10::bigint,
			$11::smallint, $12::smallint, $13::bigint, $14::bigint, $15::bigint, $16::bigint, $17::bigint)`,
		putEmpty: `SELECT ` + sch + `.put_bucket_if($1::text, $2::smallint, $3::bigint, $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::bigint, $9::boolean, $10::bigint,
			$11::smallint, $12::smallint, $13::bigint, $14::bigint, $15::bigint, $16::bigint, $17::bigint, $18::boolean)`,
		del: `DELETE FROM ` + sch + `.buckets WHERE name = $1::text`,
		reconcile: `SELECT r.o_restored, r.o_reclaimed, r.o_capped, r.o_orphans, r.o_dims, r.o_more, ` +
			notify(`CASE WHEN r.o_reclaimed > 0 THEN r.o_dims END`) + ` FROM ` + sch + `.reconcile($1::bigint, $2::int) r`,
		peek: `SELECT t.ms, u.name, ` + bucketCols + ` FROM ` + now + ` CROSS JOIN unnest($2::text[]) WITH ORDINALITY AS u(name, ord)
			LEFT JOIN ` + sch + `.buckets b ON b.name = u.name ` + leaseAgg + ` ORDER BY u.ord`,
		list: `SELECT t.ms, b.name, ` + bucketCols + ` FROM ` + now + ` CROSS JOIN ` + sch + `.buckets b ` + leaseAgg + ` ORDER BY b.name`,
		leases: `SELECT l.id, l.dims, l.costs, l.caller, l.created_ms, l.expires_ms, l.valid_ms FROM ` + now + ` CROSS JOIN ` + sch + `.leases l
			WHERE (NOT $2::boolean OR l.expires_ms <= t.ms) AND ($3::text = '' OR l.dims @> ARRAY[$3::text])
			ORDER BY l.expires_ms, l.id LIMIT NULLIF($4::bigint, 0)`,
	}
}

func uuidOf(id store.LeaseID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

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

// scanBuckets reads the rows of the peek and list queries. Read-only
// operations align and refill in Go with package bucket, which the
// differential test proves equal to the SQL port. It returns the first
// requested name that has no bucket, if any.
func (s *Store) scanBuckets(rows pgx.Rows, hint int) ([]store.BucketState, string, error) {
	defer rows.Close()
	out := make([]store.BucketState, 0, hint)
	for rows.Next() {
		var (
			nowMs                         int64
			asked                         string
			name                          *string
			typ                           *int16
			capacity, amount, period, cpc *int64
			debt, tokens, last, until     *int64
			reserved, charged             *int64
			nLeases, nx, nWaiters         *int64
		)
		if err := rows.Scan(&nowMs, &asked, &name, &typ, &capacity, &amount, &period, &cpc, &debt, &tokens, &last, &until,
			&reserved, &nLeases, &nx, &nWaiters, &charged); err != nil {
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
		st := bucket.State{Tokens: *tokens, Last: *last, Until: *until, Reserved: *reserved, Charged: *charged}
		at, _ := bucket.Align(lim, st, nowMs, s.skewMs())
		r := bucket.Refill(lim, st, at)
		bs := store.BucketState{Bucket: b, Tokens: r.Tokens, LastRefill: r.Last, CooldownUntil: r.Until, ReservedUntil: r.Reserved, Charged: r.Charged,
			Waiters: int(deref(nWaiters)), ActiveLeases: int(deref(nLeases)), Now: time.UnixMilli(nowMs)}
		if nx != nil {
			bs.NextExpiry = time.UnixMilli(*nx)
		}
		out = append(out, bs)
	}
	return out, "", rows.Err()
}

// sendable reports whether PostgreSQL can hold name as text: valid UTF-8
// without NUL. A name that is not can have no bucket (PutBucket validates
// names), so the store never sends it.
func sendable(name string) bool {
	return utf8.ValidString(name) && !strings.ContainsRune(name, 0)
}
