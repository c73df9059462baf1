package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
)

// cooldownView is what cooldown prints.
type cooldownView struct {
	Dimension string    `json:"dimension"`
	Until     time.Time `json:"until"`
	Before    float64   `json:"tokens_before"`
	After     float64   `json:"tokens_after"`
}

func newCooldownCmd(g *globals) *cobra.Command {
	var output, until, forDur string
	cmd := &cobra.Command{
		Use:   "cooldown DIMENSION (--until TIME | --for DURATION)",
		Short: "Grant nothing on a bucket until a time, after a vendor 429 with a retry-after",
		Long: `cooldown stops the whole fleet from being granted anything on a requests or
tokens bucket until --until (an RFC 3339 time) or for --for (a duration), in
one atomic write, as after a vendor's 429 with a retry-after header. The
bucket's tokens drop to zero (debt is kept); from the end of the cooldown it
earns at its refill rate again, so grants resume one at a time rather than in
a burst. A cooldown already running that ends later is kept. The cooldown is
1ms to 24h long; 'sluice bucket reset' ends it.`,
		Example: "  sluice cooldown openai#rpm --for 20s\n  sluice cooldown anthropic#rpm --until 2026-01-02T15:04:05Z -o json",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			if (until == "") == (forDur == "") {
				return usagef("give exactly one of --until and --for")
			}
			var end time.Time
			var d time.Duration
			var err error
			if until != "" {
				if end, err = time.Parse(time.RFC3339Nano, until); err != nil {
					return usagef("--until %q: must be an RFC 3339 time, e.g. 2026-01-02T15:04:05Z", until)
				}
			} else if d, err = time.ParseDuration(forDur); err != nil {
				return usagef("--for %q: must be a duration, e.g. 20s or 1m30s", forDur)
			}
			return g.WithClient(cmd, true, func(c *sluice.Client) error {
				var res sluice.CooldownResult
				var err error
				if until != "" {
					res, err = c.Cooldown(cmd.Context(), args[0], end)
				} else {
					res, err = c.CooldownFor(cmd.Context(), args[0], d)
				}
				if fe := (*sluice.FieldError)(nil); errors.As(err, &fe) {
					switch fe.Field {
					case "until":
						return usagef("--until %s: %s", until, fe.Reason)
					case "duration":
						return usagef("--for %s: %s", forDur, fe.Reason)
					}
				}
				if err != nil {
					return err
				}
				v := cooldownView{Dimension: args[0], Until: res.Until, Before: float64(res.Before) / 1000, After: float64(res.After) / 1000}
				if output == "json" {
					return clikit.WriteJSON(cmd.OutOrStdout(), v)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "cooled down %s until %s: %s -> %s tokens\n", v.Dimension,
					v.Until.Format(time.RFC3339Nano), clikit.Milli(int64(res.Before)), clikit.Milli(int64(res.After)))
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "table", "output format: table or json")
	f.StringVar(&until, "until", "", "end of the cooldown, an RFC 3339 time")
	f.StringVar(&forDur, "for", "", "length of the cooldown from now, e.g. 20s")
	return cmd
}

// syncView is what sync prints.
type syncView struct {
	Dimension string  `json:"dimension"`
	Remaining int64   `json:"remaining"`
	Before    float64 `json:"tokens_before"`
	After     float64 `json:"tokens_after"`
}

func newSyncCmd(g *globals) *cobra.Command {
	var (
		output    string
		remaining int64
	)
	cmd := &cobra.Command{
		Use:   "sync DIMENSION --remaining N",
		Short: "Lower a bucket's tokens to what the vendor reports as remaining",
		Long: `sync lowers the tokens available on a requests or tokens bucket to --remaining,
what the vendor's rate-limit headers report (x-ratelimit-remaining-requests
and the like), in one atomic write. It never raises them: a vendor that
reports more than the bucket holds changes nothing. Debt and a running
cooldown are kept.`,
		Example: "  sluice sync openai#tpm --remaining 12000\n  sluice sync openai#rpm --remaining 0 -o json",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			if !cmd.Flags().Changed("remaining") {
				return usagef("--remaining is required")
			}
			return g.WithClient(cmd, true, func(c *sluice.Client) error {
				res, err := c.Sync(cmd.Context(), args[0], remaining)
				if fe := (*sluice.FieldError)(nil); errors.As(err, &fe) && fe.Field == "remaining" {
					return usagef("--remaining %d: %s", remaining, fe.Reason)
				}
				if err != nil {
					return err
				}
				v := syncView{Dimension: args[0], Remaining: remaining, Before: float64(res.Before) / 1000, After: float64(res.After) / 1000}
				if output == "json" {
					return clikit.WriteJSON(cmd.OutOrStdout(), v)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "synced %s to %d remaining: %s -> %s tokens\n", v.Dimension, remaining,
					clikit.Milli(int64(res.Before)), clikit.Milli(int64(res.After)))
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().Int64Var(&remaining, "remaining", 0, "tokens the vendor reports as remaining")
	return cmd
}
