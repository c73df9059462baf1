package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
)

// penalizeView is what penalize prints.
type penalizeView struct {
	Dimension string  `json:"dimension"`
	Factor    float64 `json:"factor"`
	Before    float64 `json:"tokens_before"`
	After     float64 `json:"tokens_after"`
}

func newPenalizeCmd(g *globals) *cobra.Command {
	var (
		output string
		factor float64
	)
	cmd := &cobra.Command{
		Use:   "penalize DIMENSION",
		Short: "Multiply a bucket's available tokens by a factor, after a vendor 429",
		Long: `penalize multiplies the tokens available now on a requests or tokens bucket
by --factor (default 0.8), in one atomic write, so that the fleet backs off
after the vendor answered 429 Too Many Requests.`,
		Example: "  sluice penalize openai#tpm\n  sluice penalize openai#rpm --factor 0.5 -o json",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			return g.WithClient(cmd, true, func(c *sluice.Client) error {
				res, err := c.Penalize(cmd.Context(), args[0], factor)
				if fe := (*sluice.FieldError)(nil); errors.As(err, &fe) && fe.Field == "factor" {
					return usagef("--factor %v: %s", factor, fe.Reason)
				}
				if err != nil {
					return err
				}
				v := penalizeView{Dimension: args[0], Factor: factor, Before: float64(res.Before) / 1000, After: float64(res.After) / 1000}
				if output == "json" {
					return clikit.WriteJSON(cmd.OutOrStdout(), v)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "penalized %s ×%g: %s -> %s tokens\n", v.Dimension, factor, clikit.Milli(int64(res.Before)), clikit.Milli(int64(res.After)))
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().Float64Var(&factor, "factor", sluice.DefaultPenaltyFactor, "factor from 0 to 1")
	return cmd
}
