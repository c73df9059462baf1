// Package lab implements sluice-lab, the command that tries Sluice out
// and measures it: the demo, the load test (bench, with --vendor-sim
// against simulated vendor APIs through the official SDKs) and the vendor
// simulator. It is apart from the admin CLI (internal/cmd/cli) so that the
// admin binary links none of this, nor the SDKs and tokenizer it uses.
package lab

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/cmd/clistore"
	"github.com/ontopix/sluice/internal/cmd/demo"
	"github.com/ontopix/sluice/store"
)

// globals holds the persistent flags shared by every command.
type globals = clistore.Globals

// NewRoot returns the sluice-lab command tree, writing to env.
func NewRoot(env clikit.Env) *cobra.Command {
	g := &globals{Env: env}
	root := &cobra.Command{
		Use:   "sluice-lab",
		Short: "Try Sluice out and measure it: demo, load test, vendor simulator",
		Long: `sluice-lab runs Sluice for a look or a measurement, not for operating a fleet
(that is the sluice command): demo shows simulated workers sharing three
limits on the in-memory store; bench loads a store, alone or through
simulated vendor APIs (--vendor-sim), and checks no limit was exceeded;
vendorsim serves a local OpenAI, Anthropic or Azure OpenAI API that enforces
the vendor's rate limits.

The store is chosen by --store or SLUICE_STORE, as for sluice (docs/cli.md).

Exit codes: 0 ok, 1 error (or a limit exceeded), 2 usage, 3 store unavailable.`,
		Example: `  sluice-lab demo                  # 20 simulated workers share three limits for 10 s
  sluice-lab bench --store redis://127.0.0.1:6379/0 --processes 4 --workers 8 --duration 10s --limits limits.yaml
  sluice-lab vendorsim --vendor openai --rpm 60 --tpm 10000`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return clikit.Usagef("unknown command %q for %q; run 'sluice-lab --help'", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.Version = clikit.ReadVersion(env.BuildInfo).Short()
	root.SetVersionTemplate("sluice-lab {{.Version}}\n")
	clikit.Configure(root, env)
	g.AddStoreFlags(root)
	root.AddCommand(demo.NewCommand("demo", memoryOnly(g)), newBenchCmd(g), newBenchChildCmd(g), newBenchVendorChildCmd(g), newVendorsimCmd(g))
	return root
}

// Main runs the command line args against env and returns the exit code,
// printing any error to env.Stderr in one line.
func Main(ctx context.Context, args []string, env clikit.Env) int {
	return clikit.Run(ctx, NewRoot(env), args, env, clistore.Explain)
}

// memoryOnly opens --store for the demo, which runs on the memory store
// only.
func memoryOnly(g *globals) demo.Opener {
	return func(ctx context.Context) (store.Store, func() error, error) {
		op, err := g.Open(ctx)
		if err != nil {
			return nil, nil, err
		}
		if op.Kind != "memory" {
			op.Close()
			return nil, nil, clikit.Usagef("demo runs on the memory store only, not %s (use 'sluice-lab bench' on a shared store)", op.Redacted)
		}
		return op.Store, op.Close, nil
	}
}
