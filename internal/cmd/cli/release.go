package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/store"
)

// releaseView is what release prints.
type releaseView struct {
	Lease    string         `json:"lease"`
	Released bool           `json:"released"`
	Restored []restoredView `json:"restored"`
}

type restoredView struct {
	Dimension string `json:"dimension"`
	Cost      int64  `json:"cost"`
	Capped    bool   `json:"capped"`
}

func newReleaseCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "release LEASE",
		Short: "Release a lease by id, from any process",
		Long: `release deletes the lease record and gives the cost of its concurrent
dimensions back (never above capacity); requests and tokens stay consumed.
Releasing is idempotent: a lease already released, reclaimed by the
reconciler after it expired, or lost by the store (a restart without
persistence or a failover), is reported as not found and restores nothing.`,
		Example: "  sluice release 3f2b8c1e-0a4d-4c8e-9b1a-2f6d7e8c9a0b",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			id, err := store.ParseLeaseID(args[0])
			if err != nil {
				return &clikit.UsageError{Err: err}
			}
			return g.WithClient(cmd, true, func(c *sluice.Client) error {
				res, err := c.ReleaseLease(cmd.Context(), id.String())
				if err != nil {
					return err
				}
				v := releaseView{Lease: id.String(), Released: res.Released, Restored: []restoredView{}}
				for _, r := range res.Restored {
					v.Restored = append(v.Restored, restoredView{Dimension: r.Dimension, Cost: r.Cost, Capped: r.Capped})
				}
				w := cmd.OutOrStdout()
				if output == "json" {
					return clikit.WriteJSON(w, v)
				}
				if !res.Released {
					_, err := fmt.Fprintf(w, "lease %s not found: already released, reclaimed after it expired, or lost by the store (a restart without persistence or a failover); nothing restored\n", v.Lease)
					return err
				}
				fmt.Fprintf(w, "released %s\n", v.Lease)
				for _, r := range v.Restored {
					capped := ""
					if r.Capped {
						capped = " (capped at capacity)"
					}
					fmt.Fprintf(w, "  restored %d to %s%s\n", r.Cost, r.Dimension, capped)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}
