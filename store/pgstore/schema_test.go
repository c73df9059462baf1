package pgstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
)

// TestSchemaNameInjection: a schema name is spliced into SQL text (the
// function files' bodies included), so New rejects anything but a plain
// identifier before any SQL runs, and Migrate checks again.
func TestSchemaNameInjection(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, nil)
	canary := fmt.Sprintf("canary_%d", os.Getpid())
	if _, err := pool.Exec(ctx, "CREATE TABLE public."+canary+" (x int)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP TABLE IF EXISTS public."+canary) })
	bad := []string{
		"x\nDROP TABLE public." + canary + ";\n--",
		"x\rDROP TABLE public." + canary + ";\r--",
		"x$$; DROP TABLE public." + canary + "; --",
		"$$",
		`x"; DROP TABLE public.` + canary + `; --`,
		"x'; DROP TABLE public." + canary + "; --",
		"x -- comment",
		"x/*",
		"x.y",
		"x y",
		"x\ty",
		"x\x00y",
		"sch\u00e9ma",
		"1abc",
		"",
		strings.Repeat("a", 64),
	}
	for _, name := range bad {
		s, err := New(pool, WithSchema(name))
		if err == nil || s != nil {
			t.Errorf("New(WithSchema(%q)) = %v, %v; want an error", name, s, err)
			continue
		}
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("New(WithSchema(%q)): %v does not match store.ErrInvalid", name, err)
		}
		var fe *bucket.FieldError
		if !errors.As(err, &fe) || !strings.Contains(fe.Field, "WithSchema") || fe.Value != name {
			t.Errorf("New(WithSchema(%q)): %#v, want a FieldError naming WithSchema and the value", name, err)
		}
		// Even a Store built around New is refused by Migrate.
		raw := &Store{pool: pool, schema: name}
		if err := raw.Migrate(ctx); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Migrate with schema %q: %v, want store.ErrInvalid", name, err)
		}
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", "public."+canary).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		t.Fatal("the canary table was dropped")
	}
	for _, good := range []string{"sluice", "_x", "Sluice_2", strings.Repeat("a", 63)} {
		if _, err := New(pool, WithSchema(good)); err != nil {
			t.Errorf("New(WithSchema(%q)): %v", good, err)
		}
	}
}

// createAtVersion creates schema with the first n released migrations
// applied and recorded, as Migrate of an older build left it (functions
// of that version included).
func createAtVersion(t *testing.T, pool *pgxpool.Pool, schema string, n int) {
	t.Helper()
	createFrom(t, pool, schema, releasedMigrations(t)[:n])
}

// TestMigrateFromVersion1 upgrades a schema at version 1 (the tables,
// holding a concurrent bucket and a lease on it) to the functions of
// version 2: the lease releases into its bucket, and a re-created bucket
// is a new incarnation that does not count the old bucket's leases.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, nil)
	schema := pgtest.Schema()
	sch := pgx.Identifier{schema}.Sanitize()
	createAtVersion(t, pool, schema, 1)
	slots := store.Bucket{Name: "a#concurrent", Config: bucket.Config{Type: bucket.Concurrent, Capacity: 2}}
	if _, err := pool.Exec(ctx, `INSERT INTO `+sch+`.buckets (name, limit_type, capacity, refill_amount, refill_period_ms,
		cost_per_call, max_debt, tokens, last_refill_ms) VALUES ($1, 3, 2, 0, 0, 0, 0, 1000, $2)`, slots.Name, t0.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	id := store.NewLeaseID()
	if _, err := pool.Exec(ctx, `INSERT INTO `+sch+`.leases (id, caller, created_ms, expires_ms, dims, costs, incs)
		SELECT $1, 'c', $2::bigint, $2::bigint + 60000, ARRAY[name], ARRAY[1::bigint], ARRAY[incarnation] FROM `+sch+`.buckets WHERE name = $3`,
		uuidOf(id), t0.UnixMilli(), slots.Name); err != nil {
		t.Fatal(err)
	}
	s, err := New(pool, WithSchema(schema), WithCallerClock())
	if err != nil {
		t.Fatal(err)
	}
	from, to, err := s.MigrateReport(ctx)
	if err != nil || from != 1 || to != SchemaVersion() {
		t.Fatalf("MigrateReport = %d, %d, %v; want 1, %d", from, to, err, SchemaVersion())
	}
	st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{slots.Name}})
	if err != nil || st[0].Tokens != 1000 || st[0].ActiveLeases != 1 {
		t.Fatalf("Peek after upgrade = %+v, %v; want 1000 tokens, 1 lease", st, err)
	}
	rr, err := s.Release(ctx, store.ReleaseRequest{Now: t0, ID: id})
	if err != nil || !rr.Released || len(rr.Restored) != 1 {
		t.Fatalf("Release of a lease written before the upgrade = %+v, %v; want it restored", rr, err)
	}

	// A lease on a bucket since re-created is not counted on the new one.
	res := &store.AcquireResult{}
	req := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: slots.Name, Cost: 1}}, ID: store.NewLeaseID(), TTL: time.Minute}
	if err := s.Acquire(ctx, req, res); err != nil || !res.Granted {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if err := s.DeleteBucket(ctx, store.DeleteBucketRequest{Name: slots.Name}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: slots}); err != nil {
		t.Fatal(err)
	}
	st, err = s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{slots.Name}})
	if err != nil || st[0].Tokens != 2000 || st[0].ActiveLeases != 0 {
		t.Fatalf("Peek after re-create = %+v, %v; want 2000 tokens, no lease", st, err)
	}
}

// TestMigrateRefusesUnknownMigrations: a schema whose recorded migrations
// are not this code's (a pre-release build numbered them differently, or
// someone recorded their own) is never taken as up to date, whatever its
// version number; Migrate says to drop it and changes nothing. (A version
// above this code's with a name it does not know is a newer schema,
// reported as such: internal/cmd/cli's TestPostgresNewer.)
func TestMigrateRefusesUnknownMigrations(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, nil)
	for _, tc := range []struct {
		version int
		name    string
	}{
		{2, "002_operations.sql"},
		{4, "004_skew_reuse.sql"},
		{2, "002_local_change.sql"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := pgtest.Schema()
			sch := pgx.Identifier{schema}.Sanitize()
			createAtVersion(t, pool, schema, 1)
			if _, err := pool.Exec(ctx, "INSERT INTO "+sch+".schema_migrations (version, name) VALUES ($1, $2)", tc.version, tc.name); err != nil {
				t.Fatal(err)
			}
			s, err := New(pool, WithSchema(schema), WithTimeout(testTimeout))
			if err != nil {
				t.Fatal(err)
			}
			err = s.Migrate(ctx)
			if err == nil || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), tc.name) || !strings.Contains(err.Error(), "drop") {
				t.Fatalf("Migrate over a recorded %s: %v; want an error naming it and saying to drop the schema", tc.name, err)
			}
			if v, err := s.Version(ctx); err != nil || v != tc.version {
				t.Errorf("Version after the refused Migrate = %d, %v; want %d (unchanged)", v, err, tc.version)
			}
		})
	}
}

// TestOutdatedSchemaIsAConfigurationError runs this code against a schema
// left at version 1 (tables, no functions): operations fail with an error that says to migrate,
// never with store.ErrUnavailable (an outage), and work after Migrate.
func TestOutdatedSchemaIsAConfigurationError(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, nil)
	schema := pgtest.Schema()
	sch := pgx.Identifier{schema}.Sanitize()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+sch); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:1] {
		if _, err := pool.Exec(ctx, strings.ReplaceAll(m.sql, "__SCHEMA__", sch)); err != nil {
			t.Fatal(m.name, err)
		}
	}
	s, err := New(pool, WithSchema(schema), WithCallerClock(), WithTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	b := store.Bucket{Name: "r", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)}
	err = s.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: b})
	if err == nil || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "run Migrate") {
		t.Fatalf("PutBucket on a version-1 schema: %v; want an error saying to migrate, not ErrUnavailable", err)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42883" {
		t.Errorf("the server's error is not kept in the chain: %v", err)
	}
	missing, err := New(pool, WithSchema(pgtest.Schema()), WithCallerClock())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := missing.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"r"}}); err == nil || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "run Migrate") {
		t.Errorf("Peek on a missing schema: %v; want an error saying to migrate", err)
	}
	// Record version 1, as Migrate would have, so that Migrate brings the
	// schema up to date.
	for _, m := range ms[:1] {
		if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+sch+".schema_migrations (version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "INSERT INTO "+sch+".schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: b}); err != nil {
		t.Fatalf("PutBucket after Migrate: %v", err)
	}
}

// TestMigrateFromVersion2 upgrades in place a schema at version 2 holding
// live buckets (a requests bucket partly spent and a concurrent one with a
// lease out, written through the version-2 functions), from several
// processes at once: exactly one applies the upgrade under the migration
// lock, the balances, refill timestamps and leases are kept, the buckets
// read as never cooled, and cooldowns work on them at once.
func TestMigrateFromVersion2(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, nil)
	schema := pgtest.Schema()
	createAtVersion(t, pool, schema, 2)
	s, err := New(pool, WithSchema(schema), WithCallerClock(), WithTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, store.Bucket{Name: "r", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	put(t, s, store.Bucket{Name: "c", Config: bucket.ConcurrentSlots(2)})
	acq := func(at time.Duration, items ...store.Item) store.AcquireResult {
		t.Helper()
		var res store.AcquireResult
		req := &store.AcquireRequest{Now: t0.Add(at), Items: items, ID: store.NewLeaseID(), TTL: time.Hour}
		if err := s.Acquire(ctx, req, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := acq(0, store.Item{Dimension: "r", Cost: 4}); !res.Granted {
		t.Fatalf("acquire on version 2: %+v", res)
	}
	var lease store.AcquireResult
	id := store.NewLeaseID()
	if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "c", Cost: 1}}, ID: id, TTL: time.Hour}, &lease); err != nil || !lease.Granted {
		t.Fatalf("concurrent acquire on version 2: %+v, %v", lease, err)
	}

	// This code on the version-2 schema: what needs the new column or
	// functions says to migrate (never ErrUnavailable).
	for op, f := range map[string]func() error{
		"peek": func() error {
			_, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"r"}})
			return err
		},
		"list buckets": func() error {
			_, err := s.ListBuckets(ctx, store.ListBucketsRequest{Now: t0})
			return err
		},
		"cooldown": func() error {
			_, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: "r", Until: t0.Add(time.Second)})
			return err
		},
		"sync": func() error {
			_, err := s.Sync(ctx, store.SyncRequest{Now: t0, Dimension: "r", Remaining: 1})
			return err
		},
	} {
		if err := f(); err == nil || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "run Migrate") {
			t.Errorf("%s on a version-2 schema: %v; want an error saying to migrate", op, err)
		}
	}

	var wg sync.WaitGroup
	type report struct {
		from, to int
		err      error
	}
	reports := make([]report, 4)
	for i := range reports {
		p := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
		m, err := New(p, WithSchema(schema), WithTimeout(testTimeout))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			r := &reports[i]
			r.from, r.to, r.err = m.MigrateReport(ctx)
		})
	}
	wg.Wait()
	applied := 0
	for i, r := range reports {
		switch {
		case r.err != nil:
			t.Errorf("MigrateReport %d: %v", i, r.err)
		case r.from == 2 && r.to == SchemaVersion():
			applied++
		case r.from != SchemaVersion() || r.to != SchemaVersion():
			t.Errorf("MigrateReport %d = %d, %d; want 2 → %d or nothing to do", i, r.from, r.to, SchemaVersion())
		}
	}
	if applied != 1 {
		t.Errorf("%d processes applied the upgrade, want exactly 1", applied)
	}

	st, err := s.Peek(ctx, store.PeekRequest{Now: t0.Add(6 * time.Second), Dimensions: []string{"r", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := st[0]; r.Tokens != 7_000 || r.LastRefill != t0.Add(6*time.Second).UnixMilli() || r.CooldownUntil != 0 {
		t.Errorf("r after the upgrade = %+v; want 7000 millitokens at t0+6s (6 left, one earned), no cooldown", r)
	}
	if c := st[1]; c.Tokens != 1_000 || c.ActiveLeases != 1 || c.CooldownUntil != 0 {
		t.Errorf("c after the upgrade = %+v; want 1000 millitokens, 1 lease, no cooldown", c)
	}
	cd, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0.Add(6 * time.Second), Dimension: "r", Until: t0.Add(16 * time.Second)})
	if want := (store.CooldownResult{Before: 7_000, After: 0, Until: t0.Add(16 * time.Second).UnixMilli()}); err != nil || cd != want {
		t.Errorf("Cooldown after the upgrade = %+v, %v; want %+v", cd, err, want)
	}
	// The wait runs to the end of the cooldown, then 6 s to earn a token.
	if res := acq(6*time.Second, store.Item{Dimension: "r", Cost: 1}); res.Granted || res.RetryIn != 16*time.Second {
		t.Errorf("acquire during the cooldown: granted %v, RetryIn %v; want denied, 16s", res.Granted, res.RetryIn)
	}
	rr, err := s.Release(ctx, store.ReleaseRequest{Now: t0, ID: id})
	if err != nil || !rr.Released || len(rr.Restored) != 1 {
		t.Errorf("Release of a lease granted before the upgrade = %+v, %v; want it restored", rr, err)
	}
}
