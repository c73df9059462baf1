package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/cmd/jsonout"
	"github.com/ontopix/sluice/store"
)

// acquireView is what acquire prints.
type acquireView struct {
	Outcome    string            `json:"outcome"`
	Lease      *leaseView        `json:"lease,omitempty"`
	RetryIn    jsonout.Duration  `json:"retry_in,omitempty"`
	Dimensions []acquireItemView `json:"dimensions"`
}

type acquireItemView struct {
	Dimension string           `json:"dimension"`
	Type      string           `json:"type"`
	Cost      int64            `json:"cost"`
	Capacity  int64            `json:"capacity"`
	Remaining float64          `json:"remaining"`
	RetryIn   jsonout.Duration `json:"retry_in,omitempty"`
}

func newAcquireCmd(g *globals) *cobra.Command {
	var (
		output, caller string
		hold, wait     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "acquire DIMENSION[:COST]...",
		Short: "Acquire a lease on one or more dimensions, all-or-nothing",
		Long: `acquire asks for every DIMENSION at once (COST tokens each, default the
bucket's cost per call): either all are debited and one lease covers them, or
nothing changes and the answer is RETRY_IN with the wait.

The lease is recorded in the store and lives for --hold (default
SLUICE_LEASE_TTL, 60s): release it early with 'sluice release LEASE', or let
it expire and the reconciler restore its concurrent slots.

With --wait, RETRY_IN answers are waited out until granted or --wait passes.
Exit code 4 means RETRY_IN.`,
		Example: `  sluice acquire openai#rpm openai#tpm:1500
  sluice acquire elevenlabs#concurrent --hold 5m --caller tts-worker
  sluice acquire openai#rpm --wait 30s --output json`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			its, err := clikit.ParseItems(args)
			if err != nil {
				return err
			}
			cfg, err := g.Config()
			if err != nil {
				return &clikit.UsageError{Err: err}
			}
			if hold == 0 {
				hold = cfg.LeaseTTL
			}
			if hold < time.Millisecond || hold > store.MaxTTL {
				return usagef("--hold %s: must be between 1ms and 24h", hold)
			}
			if caller == "" {
				caller = cfg.Caller
			}
			if caller == "" {
				caller = "sluice-cli"
			}
			return g.WithClient(cmd, true, func(c *sluice.Client) error {
				opts := []sluice.AcquireOption{sluice.WithCaller(caller), sluice.WithTTL(hold), sluice.WithRecord()}
				res, err := acquireWaiting(cmd.Context(), c, its, wait, opts)
				if err != nil {
					return err
				}
				return printAcquire(cmd, output, res)
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "table", "output format: table or json")
	f.StringVar(&caller, "caller", "", "caller name on the lease (default SLUICE_CALLER, else sluice-cli)")
	f.DurationVar(&hold, "hold", 0, "lease lifetime (default SLUICE_LEASE_TTL, 60s)")
	f.DurationVar(&wait, "wait", 0, "wait out RETRY_IN answers for up to this long")
	return cmd
}

// acquireWaiting acquires its, waiting out RETRY_IN answers for up to
// wait. Contention is retried by the Client, with its backoff.
func acquireWaiting(ctx context.Context, c *sluice.Client, its []store.Item, wait time.Duration, opts []sluice.AcquireOption) (sluice.Result, error) {
	reqs, err := requestsOf(ctx, c, its)
	if err != nil {
		return sluice.Result{}, err
	}
	deadline := time.Now().Add(wait)
	for {
		res, err := acquireOnce(ctx, c, reqs, opts)
		if err != nil || res.Granted() {
			return res, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return res, nil
		}
		if err := clikit.SleepCtx(ctx, min(left, res.RetryIn)); err != nil {
			return res, err
		}
	}
}

// requestsOf turns its into requests. A zero cost means the bucket's cost
// per call: one dimension leaves that to the Client; several read it from
// the buckets first.
func requestsOf(ctx context.Context, c *sluice.Client, its []store.Item) ([]sluice.Request, error) {
	reqs := make([]sluice.Request, len(its))
	var unset []string
	for i, it := range its {
		reqs[i] = it
		if it.Cost == 0 {
			unset = append(unset, it.Dimension)
		}
	}
	if len(reqs) == 1 || len(unset) == 0 {
		return reqs, nil
	}
	states, err := c.Peek(ctx, unset...)
	if err != nil {
		return nil, err
	}
	cost := make(map[string]int64, len(states))
	for _, s := range states {
		cost[s.Name] = s.Config.Cost()
	}
	for i := range reqs {
		if reqs[i].Cost == 0 {
			reqs[i].Cost = cost[reqs[i].Dimension]
		}
	}
	return reqs, nil
}

// acquireOnce makes one acquisition of reqs.
func acquireOnce(ctx context.Context, c *sluice.Client, reqs []sluice.Request, opts []sluice.AcquireOption) (sluice.Result, error) {
	if len(reqs) > 1 {
		return c.AcquireMany(ctx, reqs, opts...)
	}
	if reqs[0].Cost > 0 {
		opts = append(opts[:len(opts):len(opts)], sluice.WithCost(reqs[0].Cost))
	}
	return c.Acquire(ctx, reqs[0].Dimension, opts...)
}

func printAcquire(cmd *cobra.Command, output string, res sluice.Result) error {
	v := acquireView{Outcome: "GRANTED"}
	for _, it := range res.Dimensions {
		v.Dimensions = append(v.Dimensions, acquireItemView{Dimension: it.Dimension, Type: it.Type.String(), Cost: it.Cost,
			Capacity: it.Capacity, Remaining: it.Remaining.Tokens(), RetryIn: jsonout.Duration(it.RetryIn)})
	}
	if l := res.Lease; res.Granted() {
		lv := leaseView{ID: l.ID(), Caller: l.Caller(), CreatedAt: l.CreatedAt().UTC(), ExpiresAt: l.ExpiresAt().UTC(),
			Dimensions: items(l.Dimensions())}
		v.Lease = &lv
	} else {
		v.Outcome, v.RetryIn = "RETRY_IN", jsonout.Duration(max(time.Millisecond, res.RetryIn))
	}
	w := cmd.OutOrStdout()
	var err error
	if output == "json" {
		err = clikit.WriteJSON(w, v)
	} else {
		if v.Lease != nil {
			fmt.Fprintf(w, "GRANTED lease %s expires %s\n", v.Lease.ID, v.Lease.ExpiresAt.Format(time.RFC3339Nano))
		} else {
			fmt.Fprintf(w, "RETRY_IN %s\n", clikit.Dur(res.RetryIn))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "DIMENSION\tTYPE\tCOST\tCAPACITY\tREMAINING\tRETRY_IN")
		for _, it := range res.Dimensions {
			ri := "-"
			if it.RetryIn > 0 {
				ri = clikit.Dur(it.RetryIn)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", it.Dimension, it.Type, it.Cost, it.Capacity, clikit.Milli(int64(it.Remaining)), ri)
		}
		err = tw.Flush()
	}
	if err != nil || res.Granted() {
		return err
	}
	var short []string
	for _, it := range res.Dimensions {
		if it.RetryIn > 0 {
			short = append(short, it.Dimension)
		}
	}
	return &clikit.RetryError{Msg: fmt.Sprintf("RETRY_IN %s: %s short", clikit.Dur(res.RetryIn), strings.Join(short, ", "))}
}
