package cli

import (
	"fmt"
	limitsfile "github.com/ontopix/sluice/limits"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
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
		Args: noArgs,
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
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFlag(output); err != nil {
				return err
			}
			return g.withStore(cmd.Context(), func(st store.Store) error {
				states, err := st.ListBuckets(cmd.Context(), store.ListBucketsRequest{Now: g.now()})
				if err != nil {
					return err
				}
				views := make([]bucketView, len(states))
				for i, s := range states {
					views[i] = viewOf(s)
				}
				if output == "json" {
					return writeJSON(cmd.OutOrStdout(), views)
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
			refill = itoa(v.RefillAmount)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\n", v.Dimension, v.Type, v.Capacity, refill, v.RefillPeriod,
			v.CostPerCall, v.MaxDebt, milli(v.TokensMilli))
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
			if err := outputFlag(output); err != nil {
				return err
			}
			return g.withStore(cmd.Context(), func(st store.Store) error {
				s, err := st.Peek(cmd.Context(), store.PeekRequest{Now: g.now(), Dimensions: args})
				if err != nil {
					return err
				}
				v := viewOf(s[0])
				if output == "json" {
					return writeJSON(cmd.OutOrStdout(), v)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
				next := "-"
				if v.NextExpiry != nil {
					next = v.NextExpiry.Format(time.RFC3339Nano)
				}
				for _, kv := range [][2]string{
					{"dimension", v.Dimension}, {"type", v.Type}, {"limit", rateOf(v)}, {"capacity", itoa(v.Capacity)},
					{"refill", itoa(v.RefillAmount) + " per " + v.RefillPeriod}, {"cost per call", itoa(v.CostPerCall)},
					{"max debt", itoa(v.MaxDebt)}, {"tokens", milli(v.TokensMilli)}, {"fill", fmt.Sprintf("%.1f%%", v.FillPct)},
					{"active leases", fmt.Sprint(v.ActiveLeases)}, {"next expiry", next}, {"time to full", v.timeToFull()},
				} {
					fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
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

func (f *bucketFlags) config() (bucket.Config, error) {
	t, err := bucket.ParseType(f.typ)
	if err != nil {
		return bucket.Config{}, usagef("--type %q: must be requests, tokens or concurrent", f.typ)
	}
	c := bucket.Config{Type: t, Capacity: f.capacity, CostPerCall: f.cost, MaxDebt: f.maxDebt}
	if t != bucket.Concurrent {
		p, err := limitsfile.ParsePeriod(f.per)
		if err != nil {
			return c, usagef("--per %q: %v", f.per, err)
		}
		c.RefillPeriod, c.RefillAmount = p, f.refill
		if c.RefillAmount == 0 {
			c.RefillAmount = c.Capacity
		}
	}
	if err := c.Validate(); err != nil {
		return c, &UsageError{Err: err}
	}
	return c, nil
}

func newBucketPutCmd(g *globals) *cobra.Command {
	var f bucketFlags
	cmd := &cobra.Command{
		Use:   "put DIMENSION --type T --capacity N [--per 1m] [--refill N]",
		Short: "Create or reconfigure a bucket (keeps its live balance unless --reset)",
		Long: `put creates a bucket, full, or reconfigures an existing one. An existing
bucket keeps its balance (clamped to the new capacity) unless --reset fills it.
--refill defaults to --capacity (N per period); a smaller --refill with a
larger --capacity allows a burst.`,
		Example: `  sluice bucket put openai#rpm --type requests --capacity 500 --per 1m
  sluice bucket put openai#tpm --type tokens --capacity 40000 --refill 30000 --per 1m --cost 1000
  sluice bucket put elevenlabs#concurrent --type concurrent --capacity 5`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.config()
			if err != nil {
				return err
			}
			b := store.Bucket{Name: args[0], Config: c}
			if err := contract.Bucket(b); err != nil {
				return &UsageError{Err: err}
			}
			return g.withStore(cmd.Context(), func(st store.Store) error {
				if err := st.PutBucket(cmd.Context(), store.PutBucketRequest{Now: g.now(), Bucket: b, Reset: f.reset}); err != nil {
					return err
				}
				how := "keeping its balance"
				if f.reset {
					how = "full"
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "put %s: %s %s (%s)\n", b.Name, c.Type, rateString(c), how)
				return err
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.typ, "type", "", "limit type: requests, tokens or concurrent (required)")
	fl.Int64Var(&f.capacity, "capacity", 0, "capacity in tokens (the burst), or slots for concurrent (required)")
	fl.StringVar(&f.per, "per", "1m", "refill period: 1s, 1m, 1h, 1d or a Go duration")
	fl.Int64Var(&f.refill, "refill", 0, "tokens added every period (default: the capacity)")
	fl.Int64Var(&f.cost, "cost", 0, "cost per call when an acquisition names none (default 1)")
	fl.Int64Var(&f.maxDebt, "max-debt", 0, "how far below zero settlements may go, in tokens (0: capacity, -1: none)")
	fl.BoolVar(&f.reset, "reset", false, "fill the bucket to capacity")
	_ = cmd.MarkFlagRequired("type")
	_ = cmd.MarkFlagRequired("capacity")
	return cmd
}

func newBucketDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "delete DIMENSION",
		Short:   "Delete a bucket (its leases become orphans the reconciler removes)",
		Example: "  sluice bucket delete openai#rpm",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(cmd.Context(), func(st store.Store) error {
				if err := st.DeleteBucket(cmd.Context(), store.DeleteBucketRequest{Name: args[0]}); err != nil {
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
			return g.withStore(cmd.Context(), func(st store.Store) error {
				states, err := st.Peek(cmd.Context(), store.PeekRequest{Now: g.now(), Dimensions: args})
				if err != nil {
					return err
				}
				for _, s := range states {
					if err := st.PutBucket(cmd.Context(), store.PutBucketRequest{Now: g.now(), Bucket: s.Bucket, Reset: true}); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "reset %s: %s -> %d tokens\n", s.Name, milli(s.Tokens), s.Capacity)
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
