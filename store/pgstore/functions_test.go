package pgstore

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/internal/testing/pgtest"
)

// releasedMigrations returns the migrations as released up to version 11,
// when each one still created or replaced its functions itself
// (testdata/migrations-v11.tar.gz; see testdata/README.md): what Migrate
// of an older build ran on the databases this code upgrades.
func releasedMigrations(t testing.TB) []migration {
	t.Helper()
	f, err := os.Open("testdata/migrations-v11.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []migration
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		base := path.Base(h.Name)
		if h.Typeflag != tar.TypeReg || !strings.HasSuffix(base, ".sql") {
			continue
		}
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			t.Fatalf("released migration %s: %v", h.Name, err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	return out
}

// schemaCatalog describes what a schema holds, the schema's own name
// written __SCHEMA__: every function's definition (pg_get_functiondef,
// keyed by its signature), every column, index and constraint.
func schemaCatalog(t *testing.T, pool *pgxpool.Pool, schema string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, q := range []string{
		`SELECT 'function ' || p.oid::regprocedure::text, pg_get_functiondef(p.oid)
		   FROM pg_proc p WHERE p.pronamespace = $1::regnamespace`,
		`SELECT 'column ' || table_name || '.' || column_name,
		        concat_ws(' ', ordinal_position, data_type, udt_name, collation_name, is_nullable, column_default)
		   FROM information_schema.columns WHERE table_schema = $1`,
		`SELECT 'index ' || indexname, indexdef FROM pg_indexes WHERE schemaname = $1`,
		`SELECT 'constraint ' || c.conrelid::regclass::text || ' ' || c.conname, pg_get_constraintdef(c.oid)
		   FROM pg_constraint c WHERE c.connamespace = $1::regnamespace`,
		`SELECT 'relation ' || c.relname, c.relkind::text || ' ' || coalesce(array_to_string(c.reloptions, ','), '')
		   FROM pg_class c WHERE c.relnamespace = $1::regnamespace`,
	} {
		rows, err := pool.Query(ctx, q, schema)
		if err != nil {
			t.Fatal(err)
		}
		var k, v string
		_, err = pgx.ForEachRow(rows, []any{&k, &v}, func() error {
			out[strings.ReplaceAll(k, schema, "__SCHEMA__")] = strings.ReplaceAll(v, schema, "__SCHEMA__")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// diffCatalogs lists what differs between two schemaCatalogs.
func diffCatalogs(got, want map[string]string) []string {
	var d []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			d = append(d, "missing "+k)
		} else if g != w {
			d = append(d, fmt.Sprintf("%s differs:\n got: %s\nwant: %s", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			d = append(d, "extra "+k)
		}
	}
	slices.Sort(d)
	return d
}

// TestMigrateMatchesReleasedMigrations: the schema this code's Migrate
// builds from nothing is the one the released migrations of version 11,
// which still defined the functions themselves, built: the same functions
// (pg_get_functiondef, old overloads included), columns, indexes and
// constraints. Migrate from a schema those migrations left at any version
// ends with the same schema again, and a Migrate with nothing to migrate
// writes nothing (a function changed by hand stays as it is).
func TestMigrateMatchesReleasedMigrations(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, nil)
	released := releasedMigrations(t)
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < len(released) {
		t.Fatalf("%d embedded migrations, %d released", len(ms), len(released))
	}
	for i, r := range released {
		if ms[i].version != r.version || ms[i].name != r.name {
			t.Fatalf("embedded migration %d is %s, released %s: versions and names must stay as released", i, ms[i].name, r.name)
		}
	}
	migrated := func(t *testing.T, schema string, wantFrom int) map[string]string {
		t.Helper()
		s, err := New(pool, WithSchema(schema), WithTimeout(testTimeout))
		if err != nil {
			t.Fatal(err)
		}
		if from, to, err := s.MigrateReport(ctx); err != nil || from != wantFrom || to != SchemaVersion() {
			t.Fatalf("MigrateReport = %d, %d, %v; want %d, %d", from, to, err, wantFrom, SchemaVersion())
		}
		return schemaCatalog(t, pool, schema)
	}
	fresh := pgtest.Schema()
	want := migrated(t, fresh, 0)
	if len(want) == 0 {
		t.Fatal("the migrated schema is empty")
	}

	if SchemaVersion() == released[len(released)-1].version {
		old := pgtest.Schema()
		createFrom(t, pool, old, released)
		if d := diffCatalogs(want, schemaCatalog(t, pool, old)); len(d) > 0 {
			t.Errorf("a new schema differs from the released migrations' one:\n%s", strings.Join(d, "\n"))
		}
	} else {
		t.Logf("schema version %d is past the released migrations' %d: only upgrades from them are compared", SchemaVersion(), released[len(released)-1].version)
	}

	for n := 1; n <= len(released); n++ {
		t.Run(fmt.Sprintf("from%d", released[n-1].version), func(t *testing.T) {
			schema := pgtest.Schema()
			createFrom(t, pool, schema, released[:n])
			if d := diffCatalogs(migrated(t, schema, released[n-1].version), want); len(d) > 0 {
				t.Errorf("the upgraded schema differs from a new one:\n%s", strings.Join(d, "\n"))
			}
		})
	}

	// A Migrate with nothing to migrate writes nothing, functions included:
	// one changed by hand stays changed.
	sch := pgx.Identifier{fresh}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE OR REPLACE FUNCTION "+sch+".now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS $$ SELECT 0::bigint $$"); err != nil {
		t.Fatal(err)
	}
	changed := schemaCatalog(t, pool, fresh)
	if d := diffCatalogs(migrated(t, fresh, SchemaVersion()), changed); len(d) > 0 {
		t.Errorf("a Migrate with nothing to migrate changed the schema:\n%s", strings.Join(d, "\n"))
	}
	if d := diffCatalogs(changed, want); len(d) == 0 {
		t.Error("the function changed by hand does not show in the catalog: the comparison cannot see a change")
	}
}

// TestFunctionFiles: each file of functions/ defines, with CREATE OR
// REPLACE, only functions named after the file, and the files hold every
// function of the schema.
func TestFunctionFiles(t *testing.T) {
	files, err := functionFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no function files")
	}
	for _, f := range files {
		name := strings.TrimSuffix(f.name, ".sql")
		defs := strings.Count(f.sql, "CREATE OR REPLACE FUNCTION ")
		if defs == 0 || strings.Count(f.sql, "CREATE OR REPLACE FUNCTION __SCHEMA__."+name+"(") != defs {
			t.Errorf("%s: want only CREATE OR REPLACE FUNCTION __SCHEMA__.%s( statements", f.name, name)
		}
		if strings.Count(f.sql, "CREATE ") != defs {
			t.Errorf("%s: holds statements other than the definitions of %s", f.name, name)
		}
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	def := regexp.MustCompile(`(?im)^\s*CREATE\s+(OR\s+REPLACE\s+)?FUNCTION`)
	for _, m := range ms {
		if def.MatchString(m.sql) {
			t.Errorf("migration %s defines a function: functions belong in functions/", m.name)
		}
	}
}

// createFrom creates schema with the migrations ms applied and recorded,
// as Migrate of the build that had them left it.
func createFrom(t *testing.T, pool *pgxpool.Pool, schema string, ms []migration) {
	t.Helper()
	ctx := context.Background()
	sch := pgx.Identifier{schema}.Sanitize()
	for _, stmt := range []string{
		"CREATE SCHEMA " + sch,
		"CREATE TABLE " + sch + ".schema_migrations (version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms {
		if _, err := pool.Exec(ctx, strings.ReplaceAll(m.sql, "__SCHEMA__", sch)); err != nil {
			t.Fatal(m.name, err)
		}
		if _, err := pool.Exec(ctx, "INSERT INTO "+sch+".schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
}
