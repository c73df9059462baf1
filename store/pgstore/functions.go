package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed functions/*.sql
var functionFS embed.FS

// functionFile is one embedded file of functions/: the current definition
// of one server-side function, every overload of its name included, as
// CREATE OR REPLACE FUNCTION statements.
type functionFile struct {
	name string
	sql  string
}

// functionFiles returns the embedded function files in name order.
func functionFiles() ([]functionFile, error) {
	names, err := fs.Glob(functionFS, "functions/*.sql")
	if err != nil {
		return nil, err
	}
	out := make([]functionFile, 0, len(names))
	for _, n := range names {
		b, err := functionFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, functionFile{name: strings.TrimPrefix(n, "functions/"), sql: string(b)})
	}
	return out, nil
}

// applyFunctions creates or replaces every function of functions/ in the
// schema sch (quoted) within tx, which Migrate runs after the migrations
// it applied, under its lock: whatever version the schema came from, it
// ends with exactly these definitions. The files are applied twice: first with
// check_function_bodies off, as pg_dump restores functions, so that a SQL
// function may call one from a file later in name order; then with it on,
// so that every body is checked now rather than at its first call.
// exec runs each statement (Store.exec: bounded by the store's timeout).
func applyFunctions(ctx context.Context, tx pgx.Tx, sch string, exec func(context.Context, pgx.Tx, string, ...any) error) error {
	files, err := functionFiles()
	if err != nil {
		return err
	}
	for _, check := range []string{"off", "on"} {
		if err := exec(ctx, tx, "SET LOCAL check_function_bodies = "+check); err != nil {
			return fail("migrate", err)
		}
		for _, f := range files {
			if err := exec(ctx, tx, strings.ReplaceAll(f.sql, "__SCHEMA__", sch)); err != nil {
				return fmt.Errorf("pgstore: function %s: %w", f.name, fail("migrate", err))
			}
		}
	}
	return nil
}
