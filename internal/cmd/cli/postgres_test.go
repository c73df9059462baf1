package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store/pgstore"
)

// TestPostgresMigrate runs postgres version and migrate on a fresh schema:
// absent, created, then idempotent; several processes may migrate at once.
func TestPostgresMigrate(t *testing.T) {
	latest := pgstore.SchemaVersion()
	schema := pgSchema(t)
	e := &testEnv{t: t, url: pgURL(t, schema, "migrate=false")}

	want := fmt.Sprintf("schema %s: version 0, this sluice needs %d: absent (run 'sluice postgres migrate')\n", schema, latest)
	if out := e.ok("postgres", "version"); out != want {
		t.Errorf("version before:\n got %q\nwant %q", out, want)
	}
	// migrate=false: other commands do not create the schema.
	if _, errs, code := e.run("status"); code != clikit.ExitError || !strings.Contains(errs, "run 'sluice postgres migrate'") {
		t.Errorf("status on an absent schema with migrate=false: exit %d %s", code, errs)
	}
	if out := e.ok("postgres", "migrate"); out != fmt.Sprintf("schema %s: created at version %d\n", schema, latest) {
		t.Errorf("first migrate:\n%s", out)
	}
	if out := e.ok("postgres", "migrate"); out != fmt.Sprintf("schema %s: already at version %d, nothing to do\n", schema, latest) {
		t.Errorf("second migrate:\n%s", out)
	}
	var mv pgMigrateView
	if err := json.Unmarshal([]byte(e.ok("postgres", "migrate", "-o", "json")), &mv); err != nil ||
		mv != (pgMigrateView{Schema: schema, Before: latest, After: latest, Latest: latest}) {
		t.Errorf("migrate json: %v %+v", err, mv)
	}
	var vv pgVersionView
	if err := json.Unmarshal([]byte(e.ok("postgres", "version", "-o", "json")), &vv); err != nil ||
		vv != (pgVersionView{Schema: schema, Version: latest, Latest: latest, State: "up to date"}) {
		t.Errorf("version json: %v %+v", err, vv)
	}
	e.ok("bucket", "put", "openai#rpm", "--type", "requests", "--capacity", "3")
	e.ok("acquire", "openai#rpm")

	// Concurrent migrations of a fresh schema: exactly one creates it.
	c := &testEnv{t: t, url: pgURL(t, pgSchema(t), "migrate=false")}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		outs []pgMigrateView
	)
	for range 4 {
		wg.Go(func() {
			out, errs, code := c.run("postgres", "migrate", "-o", "json")
			var v pgMigrateView
			if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
				t.Errorf("concurrent migrate: exit %d %v\n%s", code, err, errs)
			}
			mu.Lock()
			outs = append(outs, v)
			mu.Unlock()
		})
	}
	wg.Wait()
	migrated := 0
	for _, v := range outs {
		if v.After != latest {
			t.Errorf("concurrent migrate: %+v", v)
		}
		if v.Migrated {
			migrated++
		}
	}
	// Versions are read under the migration lock: exactly one run applied
	// the migrations and says so; the others found nothing to do.
	if migrated != 1 {
		t.Errorf("%d concurrent migrations report migrating, want exactly 1: %+v", migrated, outs)
	}
	if out := c.ok("postgres", "version"); !strings.Contains(out, ": up to date\n") {
		t.Errorf("after concurrent migrations:\n%s", out)
	}
}

// TestPostgresNewer: a schema newer than this binary is reported by version
// and refused by migrate.
func TestPostgresNewer(t *testing.T) {
	schema := pgSchema(t)
	e := &testEnv{t: t, url: pgURL(t, schema)}
	e.ok("postgres", "migrate")
	p := pgtest.Pool(t, nil)
	if _, err := p.Exec(t.Context(), fmt.Sprintf(`INSERT INTO %q.schema_migrations (version, name) VALUES (9999, '9999_future.sql')`, schema)); err != nil {
		t.Fatal(err)
	}
	if out := e.ok("postgres", "version"); !strings.Contains(out, "version 9999") || !strings.Contains(out, "newer (this sluice is older") {
		t.Errorf("version:\n%s", out)
	}
	if _, errs, code := e.run("postgres", "migrate"); code != clikit.ExitError || !strings.Contains(errs, "newer than this code") {
		t.Errorf("migrate a newer schema: exit %d %s", code, errs)
	}
}
