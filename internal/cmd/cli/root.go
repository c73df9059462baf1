// Package cli implements the sluice command line. Each command lives in its
// own file and is added to the tree by NewRoot; commands write only to the
// Env they are given, so tests run them in-process.
package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/cmd/clistore"
)

// Env is everything a command reads from or writes to its process.
type Env = clikit.Env

// OSEnv returns the Env of the running process.
func OSEnv() Env { return clikit.OSEnv() }

// globals holds the persistent flags shared by every command.
type globals = clistore.Globals

// NewRoot returns the sluice command tree, writing to env.
func NewRoot(env Env) *cobra.Command {
	g := &globals{Env: env}
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Share vendor API limits across a fleet",
		Long: `Sluice lets many processes share vendor API limits (requests or tokens per
minute, concurrent requests) through a shared store. A caller asks for a slot
and gets GRANTED, with a lease, or RETRY_IN, with exactly how long to wait.

The store is chosen by --store or SLUICE_STORE: memory:// (in-process, gone
when the command exits), redis://host:port/db, rediss://…, redis+cluster://h1:p1,h2:p2,
postgres://user@host/db, dynamodb://TABLE?region=R. See docs/cli.md.
A password never goes in the URL: use SLUICE_REDIS_PASSWORD, PGPASSWORD or
--password-file.

The demo, the load test and the vendor simulator are a separate command,
sluice-lab.

Exit codes: 0 ok, 1 error, 2 usage, 3 store unavailable, 4 RETRY_IN (acquire).`,
		Example: `  export SLUICE_STORE=redis://127.0.0.1:6379/0
  sluice limits apply -f limits.yaml
  sluice status --watch
  sluice acquire openai#rpm openai#tpm:1500 --hold 30s`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q; run 'sluice --help'", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	// --version prints the first line of 'sluice version'.
	root.Version = clikit.ReadVersion(env.BuildInfo).Short()
	root.SetVersionTemplate("sluice {{.Version}}\n")
	clikit.Configure(root, env)
	g.AddStoreFlags(root)
	root.AddCommand(newVersionCmd(g), newStatusCmd(g), newBucketCmd(g), newLeasesCmd(g),
		newAcquireCmd(g), newReleaseCmd(g), newPenalizeCmd(g), newCooldownCmd(g), newSyncCmd(g), newReconcileCmd(g), newLimitsCmd(g), newTopCmd(g),
		newPostgresCmd(g), newDynamoDBCmd(g), newServeCmd(g), newCompletionCmd(root))
	return root
}

// Main runs the command line args against env and returns the exit code,
// printing any error to env.Stderr in one line.
func Main(ctx context.Context, args []string, env Env) int {
	return clikit.Run(ctx, NewRoot(env), args, env, clistore.Explain)
}

// usagef returns a usage error (exit code 2).
func usagef(format string, args ...any) error { return clikit.Usagef(format, args...) }
