package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
)

// leaseView is a lease record as leases list and acquire print it.
type leaseView struct {
	ID         string     `json:"id"`
	Caller     string     `json:"caller"`
	Dimensions []itemView `json:"dimensions"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	Expired    bool       `json:"expired"`
}

type itemView struct {
	Dimension string `json:"dimension"`
	Cost      int64  `json:"cost"`
}

func items(its []sluice.Request) []itemView {
	out := make([]itemView, len(its))
	for i, it := range its {
		out[i] = itemView{Dimension: it.Dimension, Cost: it.Cost}
	}
	return out
}

func itemsString(its []itemView) string {
	parts := make([]string, len(its))
	for i, it := range its {
		parts[i] = fmt.Sprintf("%s:%d", it.Dimension, it.Cost)
	}
	return strings.Join(parts, " ")
}

func newLeasesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "leases",
		Short:   "Inspect lease records",
		Example: "  sluice leases list\n  sluice leases list --expired --dimension elevenlabs#concurrent",
		Args:    clikit.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var (
		output  string
		expired bool
		dim     string
		limit   int
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List lease records, soonest expiry first",
		Long: `list prints the lease records in the store: concurrent acquisitions, and
others acquired with a record (sluice acquire always records). --expired keeps
those past their expiry, which the reconciler has yet to reclaim.`,
		Example: `  sluice leases list
  sluice leases list --expired
  sluice leases list --dimension elevenlabs#concurrent --output json`,
		Args: clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			if limit < 0 {
				return usagef("--limit %d: must not be negative", limit)
			}
			return g.WithClient(cmd, false, func(c *sluice.Client) error {
				now := g.Now()
				ls, err := c.Leases(cmd.Context(), sluice.LeaseQuery{Dimension: dim, ExpiredOnly: expired, Limit: limit})
				if err != nil {
					return err
				}
				views := make([]leaseView, len(ls))
				for i, l := range ls {
					views[i] = leaseView{ID: l.ID, Caller: l.Caller, Dimensions: items(l.Dimensions),
						CreatedAt: l.CreatedAt.UTC(), ExpiresAt: l.ExpiresAt.UTC(), Expired: !l.ExpiresAt.After(now)}
				}
				w := cmd.OutOrStdout()
				if output == "json" {
					return clikit.WriteJSON(w, views)
				}
				if len(views) == 0 {
					_, err := fmt.Fprintln(w, "no leases")
					return err
				}
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "LEASE\tCALLER\tDIMENSIONS\tCREATED\tEXPIRES")
				for _, v := range views {
					exp := "in " + clikit.Dur(v.ExpiresAt.Sub(now))
					if v.Expired {
						exp = "expired " + clikit.Dur(now.Sub(v.ExpiresAt)) + " ago"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.ID, v.Caller, itemsString(v.Dimensions),
						v.CreatedAt.Format(time.RFC3339), exp)
				}
				return tw.Flush()
			})
		},
	}
	f := list.Flags()
	f.StringVarP(&output, "output", "o", "table", "output format: table or json")
	f.BoolVar(&expired, "expired", false, "only leases past their expiry")
	f.StringVar(&dim, "dimension", "", "only leases on this dimension")
	f.IntVar(&limit, "limit", 0, "at most this many leases (0: all)")
	cmd.AddCommand(list)
	return cmd
}
