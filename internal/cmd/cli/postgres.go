package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/store/pgstore"
	"github.com/ontopix/sluice/store/storeurl"
)

// pgMigrateView is what postgres migrate prints.
type pgMigrateView struct {
	Schema string `json:"schema"`
	// Before and After are the schema's versions around the migration (0:
	// no Sluice schema yet).
	Before int `json:"version_before"`
	After  int `json:"version_after"`
	// Latest is the version this binary's code needs.
	Latest   int  `json:"latest"`
	Migrated bool `json:"migrated"`
}

// pgVersionView is what postgres version prints.
type pgVersionView struct {
	Schema  string `json:"schema"`
	Version int    `json:"version"`
	Latest  int    `json:"latest"`
	// State is "up to date", "behind" (run migrate), "newer" (this binary
	// is older than the schema) or "absent" (no schema yet).
	State string `json:"state"`
}

func newPostgresCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "postgres",
		Short: "Manage the PostgreSQL store's schema",
		Long: `postgres manages the schema of the PostgreSQL store named by --store or
SLUICE_STORE (postgres://…; schema= picks the schema, default sluice).

Every other command creates or upgrades the schema when it opens the store
(unless the URL says migrate=false); run 'sluice postgres migrate' once per
deployment and open the store with migrate=false where the application's
database user may not run DDL.`,
		Example: `  export SLUICE_STORE='postgres://sluice@db.internal:5432/app?sslmode=require&schema=sluice'
  sluice postgres version
  sluice postgres migrate`,
		Args: clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var output string
	migrate := &cobra.Command{
		Use:   "migrate",
		Short: "Create the schema or bring it up to this binary's version",
		Long: `migrate creates the store's schema, or applies the migrations it lacks, and
prints the version before and after. It is idempotent and safe to run from
several processes at once: migrations run in one transaction under an
advisory lock on the schema's name, so one process applies them and the
others then find nothing to do. It never downgrades: a schema newer than
this binary is an error (exit 1).`,
		Example: `  sluice postgres migrate --store 'postgres://sluice@127.0.0.1:5432/app?schema=sluice'
  PGPASSWORD=… sluice postgres migrate -o json`,
		Args: clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			return withPostgres(cmd.Context(), g, func(st *pgstore.Store) error {
				// Both versions are read under the migration lock, so of
				// several processes migrating at once only the one that
				// applied the change reports it.
				before, after, err := st.MigrateReport(cmd.Context())
				if err != nil {
					return err
				}
				v := pgMigrateView{Schema: st.Schema(), Before: before, After: after, Latest: pgstore.SchemaVersion(), Migrated: after != before}
				if output == "json" {
					return clikit.WriteJSON(cmd.OutOrStdout(), v)
				}
				var msg string
				switch {
				case before == 0:
					msg = fmt.Sprintf("schema %s: created at version %d", v.Schema, after)
				case v.Migrated:
					msg = fmt.Sprintf("schema %s: migrated from version %d to %d", v.Schema, before, after)
				default:
					msg = fmt.Sprintf("schema %s: already at version %d, nothing to do", v.Schema, after)
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), msg)
				return err
			})
		},
	}
	migrate.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	var vOutput string
	version := &cobra.Command{
		Use:   "version",
		Short: "Print the schema's version and the version this binary needs",
		Long: `version prints the migration version of the store's schema, without
changing anything, and the version this binary's code needs. It exits 0
whatever it finds; the state tells what to do.`,
		Example: `  sluice postgres version
  sluice postgres version -o json --store 'postgres://sluice@127.0.0.1:5432/app?schema=sluice'`,
		Args: clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := clikit.OutputFlag(vOutput); err != nil {
				return err
			}
			return withPostgres(cmd.Context(), g, func(st *pgstore.Store) error {
				cur, err := st.Version(cmd.Context())
				if err != nil {
					return err
				}
				v := pgVersionView{Schema: st.Schema(), Version: cur, Latest: pgstore.SchemaVersion()}
				var hint string
				switch {
				case cur == 0:
					v.State, hint = "absent", "run 'sluice postgres migrate'"
				case cur < v.Latest:
					v.State, hint = "behind", "run 'sluice postgres migrate'"
				case cur > v.Latest:
					v.State, hint = "newer", "this sluice is older than the schema; upgrade it"
				default:
					v.State = "up to date"
				}
				if vOutput == "json" {
					return clikit.WriteJSON(cmd.OutOrStdout(), v)
				}
				msg := fmt.Sprintf("schema %s: version %d, this sluice needs %d: %s", v.Schema, cur, v.Latest, v.State)
				if hint != "" {
					msg += " (" + hint + ")"
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), msg)
				return err
			})
		},
	}
	version.Flags().StringVarP(&vOutput, "output", "o", "table", "output format: table or json")
	cmd.AddCommand(migrate, version)
	return cmd
}

// withPostgres opens the PostgreSQL store named by --store without
// migrating it, runs f and closes the store. Any other store is a usage
// error.
func withPostgres(ctx context.Context, g *globals, f func(st *pgstore.Store) error) error {
	op, err := g.OpenWith(ctx, storeurl.Options{NoMigrate: true})
	if err != nil {
		return err
	}
	defer op.Close()
	pg, ok := op.Admin.(*pgstore.Store)
	if !ok {
		return usagef("this command needs a PostgreSQL store (--store postgres://… or SLUICE_STORE), not %s", op.Redacted)
	}
	return f(pg)
}
