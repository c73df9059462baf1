package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ontopix/sluice/store"
)

// Usage history (store.Usager) lives in the tables usage_minute and
// usage_hour (migration 012), partitioned by range on start: minute rows
// by UTC day (usage_minute_YYYYMMDD), hour rows by UTC month
// (usage_hour_YYYYMM). A put inserts its rows in one statement, INSERT ...
// ON CONFLICT DO UPDATE, replacing each row's counters whole, so that a
// retried put leaves what one put left. The partitions a put needs, and
// the one after the newest, are created first, once per process and
// partition, under a transaction-level advisory lock (CREATE TABLE IF NOT
// EXISTS ... PARTITION OF, so two processes racing create it once); the
// same transaction drops the partitions whose newest row is past the
// put's retention (DROP TABLE, never DELETE). Reads leave out rows past
// their own expiry.

var _ store.Usager = (*Store)(nil)

// usageTable describes the table of one period.
type usageTable struct {
	name string                               // usage_minute or usage_hour
	span func(time.Time) (from, to time.Time) // the partition holding t
	form string                               // the time layout of a partition's suffix
}

var usageTables = map[time.Duration]usageTable{
	time.Minute: {name: "usage_minute", form: "20060102", span: func(t time.Time) (time.Time, time.Time) {
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return d, d.AddDate(0, 0, 1)
	}},
	time.Hour: {name: "usage_hour", form: "200601", span: func(t time.Time) (time.Time, time.Time) {
		m := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return m, m.AddDate(0, 1, 0)
	}},
}

// usageParts remembers the partitions this process has made sure of, by
// name: a put creates each at most once per process. Reset when an insert
// finds a partition missing (another process dropped it).
type usageParts struct {
	mu    sync.Mutex
	known map[string]bool
}

// PutUsage implements store.Usager in one upsert whose update is
// conditioned on the stored row's updated time not being later than the
// put's. Rows already past their retention (by this process's clock) are
// skipped.
func (s *Store) PutUsage(ctx context.Context, rows []store.UsageRow, retention store.UsageRetention) error {
	if err := store.ValidateUsage(rows, retention); err != nil {
		return err
	}
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	now := time.Now()
	for _, p := range []time.Duration{time.Minute, time.Hour} {
		if err := s.putUsage(ctx, rows, p, retention, now); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) putUsage(ctx context.Context, rows []store.UsageRow, p time.Duration, retention store.UsageRetention, now time.Time) error {
	type key struct {
		start          int64
		caller, writer string
	}
	tab := usageTables[p]
	idx := map[key]int{} // a row sent twice in one put: the later Updated wins
	var callers, writers, counters []string
	var starts, updated, expires []*time.Time
	var newest time.Time
	for _, r := range rows {
		exp := r.Expires(retention)
		if r.Period != p || !exp.After(now) {
			continue
		}
		js, err := json.Marshal(r.Counters)
		if err != nil {
			return fmt.Errorf("pgstore: put usage: %w", err)
		}
		if r.Counters == nil {
			js = []byte("{}")
		}
		u := r.Updated.UTC().Truncate(time.Millisecond)
		upd := &u
		start := r.Start.UTC()
		k := key{start.UnixMilli(), r.Caller, r.Writer}
		if i, ok := idx[k]; ok {
			if !u.Before(*updated[i]) {
				counters[i], updated[i], expires[i] = string(js), upd, &exp
			}
			continue
		}
		idx[k] = len(callers)
		callers, writers, counters = append(callers, r.Caller), append(writers, r.Writer), append(counters, string(js))
		starts, updated, expires = append(starts, &start), append(updated, upd), append(expires, &exp)
		if start.After(newest) {
			newest = start
		}
	}
	if len(callers) == 0 {
		return nil
	}
	sch := pgx.Identifier{s.schema}.Sanitize()
	q := `INSERT INTO ` + sch + `.` + tab.name + ` AS u (dimension, start, caller, writer, counters, updated, expires)
SELECT $1, t.s, t.c, t.w, t.x::jsonb, t.u, t.e
FROM unnest($2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[]) AS t(s, c, w, x, u, e)
ON CONFLICT (dimension, start, caller, writer) DO UPDATE
SET counters = EXCLUDED.counters, updated = EXCLUDED.updated, expires = GREATEST(u.expires, EXCLUDED.expires)
WHERE u.updated IS NULL OR u.updated <= EXCLUDED.updated`
	for attempt := 0; ; attempt++ {
		if err := s.usagePartitions(ctx, tab, starts, newest, retention.For(p), now); err != nil {
			return err
		}
		_, err := s.pool.Exec(ctx, q, rows[0].Dimension, starts, callers, writers, counters, updated, expires)
		var pe *pgconn.PgError
		if attempt == 0 && errors.As(err, &pe) && (pe.Code == "23514" || pe.Code == "42P01") {
			// No partition for a row, or one dropped under us: another
			// process dropped it (under a shorter retention). Make sure of
			// the partitions again, once.
			s.usage.mu.Lock()
			s.usage.known = nil
			s.usage.mu.Unlock()
			continue
		}
		return fail("put usage", err)
	}
}

// usageLock is the advisory lock that serialises the partition changes of
// one schema.
func usageLock(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("sluice.usage\x00" + schema))
	return int64(h.Sum64())
}

// usagePartitions makes sure the partitions of tab holding starts exist,
// and the one after newest's, and, when it creates any, drops the
// partitions whose newest possible row is past retention at now.
func (s *Store) usagePartitions(ctx context.Context, tab usageTable, starts []*time.Time, newest time.Time, retention time.Duration, now time.Time) error {
	need := map[string][2]time.Time{}
	add := func(t time.Time) {
		from, to := tab.span(t)
		need[tab.name+"_"+from.Format(tab.form)] = [2]time.Time{from, to}
	}
	for _, t := range starts {
		add(*t)
	}
	_, next := tab.span(newest)
	add(next)
	s.usage.mu.Lock()
	for name := range need {
		if s.usage.known[name] {
			delete(need, name)
		}
	}
	s.usage.mu.Unlock()
	if len(need) == 0 {
		return nil
	}
	sch := pgx.Identifier{s.schema}.Sanitize()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fail("put usage", err)
	}
	defer s.rollback(ctx, tx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", usageLock(s.schema)); err != nil {
		return fail("put usage", err)
	}
	for name, span := range need {
		stmt := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s PARTITION OF %s.%s FOR VALUES FROM ('%s') TO ('%s')",
			sch, pgx.Identifier{name}.Sanitize(), sch, tab.name, span[0].Format(time.RFC3339), span[1].Format(time.RFC3339))
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fail("put usage: create partition "+name, err)
		}
	}
	if err := dropUsagePartitions(ctx, tx, sch, s.schema, tab, retention, now); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fail("put usage", err)
	}
	s.usage.mu.Lock()
	if s.usage.known == nil {
		s.usage.known = map[string]bool{}
	}
	for name := range need {
		s.usage.known[name] = true
	}
	s.usage.mu.Unlock()
	return nil
}

// dropUsagePartitions drops tab's partitions whose end plus retention is
// before now: every row they can hold is past its retention.
func dropUsagePartitions(ctx context.Context, tx pgx.Tx, sch, schema string, tab usageTable, retention time.Duration, now time.Time) error {
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
JOIN pg_namespace n ON n.oid = p.relnamespace
WHERE n.nspname = $1 AND p.relname = $2`, schema, tab.name)
	if err != nil {
		return fail("put usage: list partitions", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fail("put usage: list partitions", err)
	}
	for _, name := range names {
		suffix, ok := strings.CutPrefix(name, tab.name+"_")
		if !ok {
			continue // not one of ours: leave it
		}
		from, err := time.Parse(tab.form, suffix)
		if err != nil {
			continue
		}
		if _, to := tab.span(from); !to.Add(retention).Before(now) {
			continue
		}
		if _, err := tx.Exec(ctx, "DROP TABLE IF EXISTS "+sch+"."+pgx.Identifier{name}.Sanitize()); err != nil {
			return fail("put usage: drop partition "+name, err)
		}
	}
	return nil
}

// ListUsage implements store.Usager in one statement.
func (s *Store) ListUsage(ctx context.Context, q store.UsageQuery) ([]store.UsageRow, error) {
	if err := store.ValidateUsageQuery(q); err != nil {
		return nil, err
	}
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	if !q.From.Before(q.To) {
		return nil, nil
	}
	sch := pgx.Identifier{s.schema}.Sanitize()
	rows, err := s.pool.Query(ctx, `SELECT start, caller, writer, counters::text, updated FROM `+sch+`.`+usageTables[q.Period].name+`
WHERE dimension = $1 AND start >= $2 AND start < $3 AND expires > $4`, q.Dimension, q.From, q.To, time.Now())
	if err != nil {
		return nil, fail("list usage", err)
	}
	var out []store.UsageRow
	var r store.UsageRow
	var js string
	var upd *time.Time
	_, err = pgx.ForEachRow(rows, []any{&r.Start, &r.Caller, &r.Writer, &js, &upd}, func() error {
		row := store.UsageRow{Dimension: q.Dimension, Caller: r.Caller, Period: q.Period, Start: r.Start.UTC(), Writer: r.Writer}
		if err := json.Unmarshal([]byte(js), &row.Counters); err != nil {
			return fmt.Errorf("pgstore: list usage: counters %s: %w", js, err)
		}
		if upd != nil {
			row.Updated = upd.UTC()
		}
		out = append(out, row)
		return nil
	})
	if err != nil {
		return nil, fail("list usage", err)
	}
	return out, nil
}
