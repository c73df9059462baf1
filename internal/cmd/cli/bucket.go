package cli

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/contract"
	limitsfile "github.com/ontopix/sluice/limits"
)

func newBucketCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bucket",
		Short: "List, show, create, change, delete and reset buckets",
		Long: `bucket manages single buckets directly. For a fleet's limits, prefer the
declarative 'sluice limits apply -f limits.yaml'.`,
		Example: `  sluice bucket list
  sluice bucket get openai#rpm -o json
  sluice bucket put openai#rpm --type requests --capacity 500 --per 1m
  sluice bucket put openai#tpm --type tokens --capacity 30000 --per 1m --max-debt 5000
  sluice bucket put elevenlabs#concurrent --type concurrent --capacity 5
  sluice bucket reset openai#tpm
  sluice bucket delete openai#rpm`,
		Args: clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBucketListCmd(g), newBucketGetCmd(g), newBucketPutCmd(g), newBucketDeleteCmd(g), newBucketResetCmd(g))
	return cmd
}

func newBucketListCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List every bucket's configuration",
		Example: "  sluice bucket list\n  sluice bucket list --output json",
		Args:    clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			return g.WithClient(cmd, false, func(c *sluice.Client) error {
				states, err := c.Buckets(cmd.Context())
				if err != nil {
					return err
				}
				views := make([]bucketView, len(states))
				for i, s := range states {
					views[i] = viewOf(s)
				}
				if output == "json" {
					return clikit.WriteJSON(cmd.OutOrStdout(), views)
				}
				return bucketTable(cmd.OutOrStdout(), views)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func bucketTable(w io.Writer, views []bucketView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DIMENSION\tTYPE\tCAPACITY\tREFILL\tPER\tCOST PER CALL\tMAX DEBT\tTOKENS")
	for _, v := range views {
		refill := "-"
		if v.RefillAmount > 0 {
			refill = clikit.Itoa(v.RefillAmount)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\n", v.Dimension, v.Type, v.Capacity, refill, clikit.PeriodString(v.RefillPeriod.D()),
			v.CostPerCall, v.MaxDebt, clikit.Milli(v.TokensMilli))
	}
	return tw.Flush()
}

func newBucketGetCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "get DIMENSION",
		Short:   "Show one bucket's configuration and state",
		Example: "  sluice bucket get openai#tpm\n  sluice bucket get openai#tpm -o json",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			return g.WithClient(cmd, false, func(c *sluice.Client) error {
				s, err := c.GetBucket(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				v := viewOf(s)
				if output == "json" {
					return clikit.WriteJSON(cmd.OutOrStdout(), v)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
				next := "-"
				if v.NextExpiry != nil {
					next = v.NextExpiry.Format(time.RFC3339Nano)
				}
				for _, kv := range [][2]string{
					{"dimension", v.Dimension}, {"type", v.Type}, {"limit", rateOf(v)}, {"capacity", clikit.Itoa(v.Capacity)},
					{"refill", clikit.Itoa(v.RefillAmount) + " per " + clikit.PeriodString(v.RefillPeriod.D())}, {"cost per call", clikit.Itoa(v.CostPerCall)},
					{"max debt", clikit.Itoa(v.MaxDebt)}, {"tokens", clikit.Milli(v.TokensMilli)}, {"fill", fmt.Sprintf("%.1f%%", v.FillPct)},
					{"active leases", fmt.Sprint(v.ActiveLeases)}, {"next expiry", next}, {"time to full", v.timeToFull()},
				} {
					fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
				}
				if v.CooldownUntil != nil {
					fmt.Fprintf(tw, "cooldown until:\t%s\n", v.cooldownUntil())
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

// bucketFlags are the configuration flags of bucket put.
type bucketFlags struct {
	typ                    string
	capacity, refill, cost int64
	maxDebt                int64
	per                    string
	reset                  bool
}

// config returns the configuration bucket put writes: a new bucket's from
// the flags (--type and --capacity required), or base with only the flags
// given on the command line (set) changed.
func (f *bucketFlags) config(set func(flag string) bool, base *bucket.Config) (bucket.Config, error) {
	var c bucket.Config
	if base != nil {
		c = *base
	} else if !set("type") || !set("capacity") {
		return c, usagef("a new bucket needs --type and --capacity")
	}
	if set("type") {
		t, err := bucket.ParseType(f.typ)
		if err != nil {
			return c, usagef("--type %q: must be requests, tokens or concurrent", f.typ)
		}
		c.Type = t
	}
	if set("capacity") {
		c.Capacity = f.capacity
	}
	if set("cost") {
		c.CostPerCall = f.cost
	}
	if set("max-debt") {
		c.MaxDebt = f.maxDebt
	}
	if c.Type == bucket.Concurrent {
		if set("per") || set("refill") {
			return c, usagef("--per and --refill do not apply to a concurrent bucket")
		}
		c.RefillAmount, c.RefillPeriod = 0, 0
	} else if err := f.refillOf(set, &c); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, &clikit.UsageError{Err: err}
	}
	return c, nil
}

// refillOf sets c's refill from --per and --refill; one not given keeps
// c's value, or for a bucket that had none (new, or concurrent until now)
// defaults to 1m and the capacity.
func (f *bucketFlags) refillOf(set func(string) bool, c *bucket.Config) error {
	if set("per") || c.RefillPeriod == 0 {
		p, err := limitsfile.ParsePeriod(f.per)
		if err != nil {
			return usagef("--per %q: %v", f.per, err)
		}
		c.RefillPeriod = p
	}
	switch {
	case set("refill"):
		c.RefillAmount = f.refill
	case c.RefillAmount == 0:
		c.RefillAmount = c.Capacity
	}
	return nil
}

func newBucketPutCmd(g *globals) *cobra.Command {
	var f bucketFlags
	cmd := &cobra.Command{
		Use:   "put DIMENSION [--type T] [--capacity N] [--per 1m] [--refill N]",
		Short: "Create or reconfigure a bucket (keeps its live balance unless --reset)",
		Long: `put creates a bucket, full, or reconfigures an existing one.

A new bucket needs --type and --capacity; --per defaults to 1m and --refill
to --capacity (N per period); a smaller --refill with a larger --capacity
allows a burst.

On an existing bucket only the flags given change: 'put DIM --capacity 5'
keeps its type, refill, cost per call and max debt. It keeps its balance
(clamped to the new capacity) unless --reset fills it.`,
		Example: `  sluice bucket put openai#rpm --type requests --capacity 500 --per 1m
  sluice bucket put openai#tpm --type tokens --capacity 40000 --refill 30000 --per 1m --cost 1000
  sluice bucket put elevenlabs#concurrent --type concurrent --capacity 5
  sluice bucket put openai#rpm --capacity 600`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := contract.Name(args[0]); err != nil {
				return &clikit.UsageError{Err: err}
			}
			return g.WithClient(cmd, true, func(c *sluice.Client) error {
				return putBucket(cmd, c, args[0], &f)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.typ, "type", "", "limit type: requests, tokens or concurrent (required for a new bucket)")
	fl.Int64Var(&f.capacity, "capacity", 0, "capacity in tokens (the burst), or slots for concurrent (required for a new bucket)")
	fl.StringVar(&f.per, "per", "1m", "refill period: 1s, 1m, 1h, 1d or a Go duration")
	fl.Int64Var(&f.refill, "refill", 0, "tokens added every period (default for a new bucket: the capacity)")
	fl.Int64Var(&f.cost, "cost", 0, "cost per call when an acquisition names none (default 1)")
	fl.Int64Var(&f.maxDebt, "max-debt", 0, "how far below zero settlements may go, in tokens (0: capacity, -1: none)")
	fl.BoolVar(&f.reset, "reset", false, "fill the bucket to capacity")
	return cmd
}

// putBucket creates or reconfigures name from f and prints what it did.
func putBucket(cmd *cobra.Command, c *sluice.Client, name string, f *bucketFlags) error {
	ctx := cmd.Context()
	var base *bucket.Config
	cur, err := c.GetBucket(ctx, name)
	switch {
	case err == nil:
		base = &cur.Config
	case !errors.Is(err, sluice.ErrUnknownDimension):
		return err
	}
	cfg, err := f.config(cmd.Flags().Changed, base)
	if err != nil {
		return err
	}
	b := sluice.Bucket{Name: name, Config: cfg}
	if err := contract.Bucket(b); err != nil {
		return &clikit.UsageError{Err: err}
	}
	var opts []sluice.PutOption
	if f.reset {
		opts = append(opts, sluice.ResetTokens())
	}
	if err := c.PutBucket(ctx, b, opts...); err != nil {
		return err
	}
	how := "created, full"
	switch {
	case base != nil && f.reset:
		how = "updated, refilled"
	case base != nil:
		how = "updated, keeping its balance"
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "put %s: %s (%s)\n", name, clikit.LimitString(cfg), how)
	return err
}

func newBucketDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "delete DIMENSION",
		Short:   "Delete a bucket (its leases become orphans the reconciler removes)",
		Example: "  sluice bucket delete openai#rpm",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.WithClient(cmd, true, func(c *sluice.Client) error {
				if err := c.DeleteBucket(cmd.Context(), args[0]); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
				return err
			})
		},
	}
}

func newBucketResetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reset DIMENSION...",
		Short: "Fill buckets to capacity, keeping their configuration",
		Long: `reset fills each bucket to its capacity. For a concurrent bucket this frees
every slot, including those held by live leases: their later release or
reclaim is capped at capacity (counted as already_capped).`,
		Example: "  sluice bucket reset openai#rpm openai#tpm",
		Args:    minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.WithClient(cmd, true, func(c *sluice.Client) error {
				states, err := c.Peek(cmd.Context(), args...)
				if err != nil {
					return err
				}
				for _, s := range states {
					if err := c.PutBucket(cmd.Context(), s.Bucket, sluice.ResetTokens()); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "reset %s: %s -> %d tokens\n", s.Name, clikit.Milli(int64(s.Tokens)), s.Capacity)
				}
				return nil
			})
		},
	}
}

// exactArgs and minArgs are cobra's validators as usage errors.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %d argument(s), got %d; usage: %s", cmd.CommandPath(), n, len(args), cmd.UseLine())
		}
		return nil
	}
}

func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("%s needs at least %d argument(s); usage: %s", cmd.CommandPath(), n, cmd.UseLine())
		}
		return nil
	}
}
