package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/reconcile"
)

func newReconcileCmd(g *globals) *cobra.Command {
	var (
		output string
		every  time.Duration
		batch  int
	)
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Reclaim expired leases once, or every interval as a sidecar",
		Long: `reconcile returns the cost of expired concurrent leases to their buckets
(capacity-guarded: a restore that would overfill is counted already_capped),
deletes expired lease records of every type and records whose bucket is gone.
Every pass logs the reconciler.complete event as a JSON line on stderr, with
restored, dimensions and already_capped. Passes are idempotent and several
reconcilers may run against one store.

Without --every it runs one pass and prints its report (for cron). With
--every it runs a pass now and then every interval until interrupted (for a
sidecar); a failed pass is logged as reconciler.error and retried.`,
		Example: `  sluice reconcile
  sluice reconcile --output json
  sluice reconcile --every 5m          # sidecar loop`,
		Args: clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			if every < 0 || (every > 0 && every < 100*time.Millisecond) {
				return usagef("--every %s: must be at least 100ms (or 0 for one pass)", every)
			}
			if batch < 1 || batch > 100_000 {
				return usagef("--batch-size %d: must be between 1 and 100000", batch)
			}
			log, err := g.Logger(cmd.ErrOrStderr())
			if err != nil {
				return &clikit.UsageError{Err: err}
			}
			op, err := g.Open(cmd.Context())
			if err != nil {
				return err
			}
			defer op.Close()
			// A batch is bounded by the store's own timeouts, not by the
			// Client's per-acquisition OpTimeout.
			c, err := g.Client(op.Store, log, func(cfg *sluice.Config) { cfg.OpTimeout = 0 })
			if err != nil {
				return err
			}
			r, err := reconcile.NewForClient(c, reconcile.WithLogger(log), reconcile.WithBatchSize(batch))
			if err != nil {
				return err
			}
			if every > 0 {
				return r.Run(cmd.Context(), every)
			}
			rep, err := r.RunOnce(cmd.Context())
			if err != nil {
				return err
			}
			defer g.WarnEphemeral(cmd, op)
			if output == "json" {
				return clikit.WriteJSON(cmd.OutOrStdout(), rep)
			}
			dims := strings.Join(rep.Dimensions, ", ")
			if dims == "" {
				dims = "-"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored %d (reclaimed %d, already capped %d, orphans %d) on %s in %d batch(es)%s\n",
				rep.Restored, rep.Reclaimed, rep.AlreadyCapped, rep.Orphans, dims, rep.Batches, truncated(rep.Truncated))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "table", "output format of the one-pass report: table or json")
	f.DurationVar(&every, "every", 0, "run a pass every interval until interrupted (e.g. 5m)")
	f.IntVar(&batch, "batch-size", reconcile.DefaultBatchSize, "expired leases per store call")
	return cmd
}

func truncated(t bool) string {
	if t {
		return "; more remain for the next pass"
	}
	return ""
}
