package pgstore

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontopix/sluice/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded SQL file, applied once, in version order.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations sorted by version. A file is
// named NNN_description.sql, NNN being its version.
func migrations() ([]migration, error) {
	files, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, f := range files {
		base := strings.TrimPrefix(f, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("pgstore: migration %q is not named NNN_description.sql", base)
		}
		b, err := migrationFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	return out, nil
}

// SchemaVersion is the schema version this package's code needs: the
// highest embedded migration.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// lockKey is the advisory lock that serialises migrations of one schema.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("sluice.migrate\x00" + schema))
	return int64(h.Sum64())
}

// Migrate creates the store's schema or brings it up to SchemaVersion. It
// runs in one transaction holding a transaction-level advisory lock on the
// schema's name, so several processes may call it at once: one applies the
// missing migrations, the others wait and then find nothing to do. The
// migrations hold the schema changes; a Migrate that applied any then
// creates or replaces the server-side functions from functions/, so the
// schema ends with this code's definitions whatever version it came from.
// A schema already at this code's version is left untouched: nothing is
// written. It never downgrades: a schema newer than this code is an error.
func (s *Store) Migrate(ctx context.Context) error {
	_, _, err := s.MigrateReport(ctx)
	return err
}

// MigrateReport is Migrate that also returns the schema's version before
// and after, both read while holding the migration lock: of several
// processes migrating at once, exactly one reports the change it applied.
// Each of its statements is bounded by the store's timeout (the first,
// waiting for the lock, included), and the whole by ctx's deadline or,
// when ctx has none, by migrateTimeout: a fresh migration is about a
// hundred round trips, too many for one operation's timeout on a slow
// link. An unfinished migration is rolled back whole.
func (s *Store) MigrateReport(ctx context.Context) (from, to int, err error) {
	if s.closed.Load() {
		return 0, 0, store.ErrClosed
	}
	// New has checked the name already; checked again because it is spliced
	// into every migration's and function file's text.
	if err := validSchema(s.schema); err != nil {
		return 0, 0, err
	}
	ctx, cancel := store.WithDefaultTimeout(ctx, max(s.timeout, migrateTimeout))
	defer cancel()
	tx, err := s.beginMigration(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer s.rollback(ctx, tx)
	return s.migrate(ctx, tx)
}

// migrateTimeout bounds a whole migration whose context has no deadline.
const migrateTimeout = time.Minute

// step bounds one statement of a migration by the store's timeout.
func (s *Store) step(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return f(ctx)
}

// beginMigration opens the migration's transaction.
func (s *Store) beginMigration(ctx context.Context) (pgx.Tx, error) {
	var tx pgx.Tx
	err := s.step(ctx, func(ctx context.Context) (err error) {
		tx, err = s.pool.Begin(ctx)
		return err
	})
	if err != nil {
		return nil, fail("migrate", err)
	}
	return tx, nil
}

// exec runs one statement of a migration within tx, bounded by step.
func (s *Store) exec(ctx context.Context, tx pgx.Tx, sql string, args ...any) error {
	return s.step(ctx, func(ctx context.Context) error {
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
}

// migrate applies the missing migrations within tx, under the lock.
func (s *Store) migrate(ctx context.Context, tx pgx.Tx) (from, to int, err error) {
	ms, err := migrations()
	if err != nil {
		return 0, 0, err
	}
	sch := pgx.Identifier{s.schema}.Sanitize()
	if err := s.exec(ctx, tx, "SELECT pg_advisory_xact_lock($1)", lockKey(s.schema)); err != nil {
		return 0, 0, fail("migrate", err)
	}
	for _, stmt := range []string{
		"CREATE SCHEMA IF NOT EXISTS " + sch,
		"CREATE TABLE IF NOT EXISTS " + sch + ".schema_migrations (version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
	} {
		if err := s.exec(ctx, tx, stmt); err != nil {
			return 0, 0, fail("migrate", err)
		}
	}
	var current int
	err = s.step(ctx, func(ctx context.Context) (err error) {
		current, err = appliedVersion(ctx, tx, sch, s.schema, ms)
		return err
	})
	if err != nil {
		return current, current, err
	}
	if latest := ms[len(ms)-1].version; current > latest {
		return current, current, fmt.Errorf("pgstore: schema %s is at version %d, newer than this code's %d", s.schema, current, latest)
	}
	to = current
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		if err := s.exec(ctx, tx, strings.ReplaceAll(m.sql, "__SCHEMA__", sch)); err != nil {
			return current, current, fmt.Errorf("pgstore: migration %s: %w", m.name, fail("migrate", err))
		}
		if err := s.exec(ctx, tx, "INSERT INTO "+sch+".schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return current, current, fail("migrate", err)
		}
		to = m.version
	}
	if to == current {
		return current, current, nil // up to date: nothing to write
	}
	if err := applyFunctions(ctx, tx, sch, s.exec); err != nil {
		return current, current, err
	}
	if err := s.step(ctx, tx.Commit); err != nil {
		return current, current, fail("migrate", err)
	}
	return current, to, nil
}

// retired are the migrations of pre-release builds, since squashed into
// the current ones.
var retired = []string{"001_init.sql", "002_operations.sql", "003_incarnation.sql", "004_skew_reuse.sql"}

// appliedVersion returns the highest migration recorded in the schema, and
// an error when a recorded migration is a retired one or, at a version this
// code has, not this code's: a schema made by a pre-release build must not
// pass for up to date. A version above this code's is left to the caller
// (a schema newer than the code).
func appliedVersion(ctx context.Context, tx pgx.Tx, sch, schema string, ms []migration) (int, error) {
	rows, err := tx.Query(ctx, "SELECT version, name FROM "+sch+".schema_migrations ORDER BY version")
	if err != nil {
		return 0, fail("migrate", err)
	}
	var recs []migration
	var r migration
	_, err = pgx.ForEachRow(rows, []any{&r.version, &r.name}, func() error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return 0, fail("migrate", err)
	}
	current, latest := 0, ms[len(ms)-1].version
	for _, r := range recs {
		current = r.version
		known := slices.ContainsFunc(ms, func(m migration) bool { return m.version == r.version && m.name == r.name })
		if slices.Contains(retired, r.name) || (r.version <= latest && !known) {
			return current, fmt.Errorf("pgstore: schema %s records migration %d %s, which this code does not have "+
				"(made by a pre-release build?): drop the schema (DROP SCHEMA %s CASCADE) and run Migrate again", schema, r.version, r.name, sch)
		}
	}
	return current, nil
}

// rollback ends tx if it is still open. It runs even when ctx is done (to
// give the connection back clean), bounded by the store's timeout so that
// a hung server cannot hold it.
func (s *Store) rollback(ctx context.Context, tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	tx.Rollback(rctx)
}

// Version returns the schema's current migration version (0 when it has
// none), within the store's timeout.
func (s *Store) Version(ctx context.Context) (int, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return 0, err
	}
	sch := pgx.Identifier{s.schema}.Sanitize()
	var exists bool
	if err := s.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", sch+".schema_migrations").Scan(&exists); err != nil {
		return 0, fail("version", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	err = s.pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+sch+".schema_migrations").Scan(&v)
	return v, fail("version", err)
}
