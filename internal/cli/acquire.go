package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// acquireView is what acquire prints.
type acquireView struct {
	Outcome    string            `json:"outcome"`
	Lease      *leaseView        `json:"lease,omitempty"`
	RetryInMs  int64             `json:"retry_in_ms,omitempty"`
	Dimensions []acquireItemView `json:"dimensions"`
}

type acquireItemView struct {
	Dimension string  `json:"dimension"`
	Type      string  `json:"type"`
	Cost      int64   `json:"cost"`
	Capacity  int64   `json:"capacity"`
	Remaining float64 `json:"remaining"`
	RetryInMs int64   `json:"retry_in_ms,omitempty"`
}

// parseItems parses DIM[:COST] arguments; the cost is after the last colon.
func parseItems(args []string) ([]store.Item, error) {
	its := make([]store.Item, 0, len(args))
	for _, a := range args {
		it := store.Item{Dimension: a}
		if i := strings.LastIndexByte(a, ':'); i >= 0 && digits(a[i+1:]) {
			n, err := strconv.ParseInt(a[i+1:], 10, 64)
			if err != nil || n < 1 {
				return nil, usagef("%q: the cost after ':' must be a whole number of tokens, at least 1", a)
			}
			it = store.Item{Dimension: a[:i], Cost: n}
		}
		if err := contract.Name(it.Dimension); err != nil {
			return nil, &UsageError{Err: err}
		}
		its = append(its, it)
	}
	return its, nil
}

// digits reports whether s is a non-empty run of ASCII digits or starts
// with a sign (so that "x:-5" is rejected as a cost, not taken as a name).
func digits(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if (r < '0' || r > '9') && !(i == 0 && (r == '-' || r == '+')) {
			return false
		}
	}
	return true
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
			if err := outputFlag(output); err != nil {
				return err
			}
			its, err := parseItems(args)
			if err != nil {
				return err
			}
			cfg, err := g.config()
			if err != nil {
				return &UsageError{Err: err}
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
			return g.withStore(cmd.Context(), func(st store.Store) error {
				req := &store.AcquireRequest{Items: its, ID: store.NewLeaseID(), Caller: caller, TTL: hold,
					Record: true, Poll: cfg.PollInterval}
				var res store.AcquireResult
				if err := acquireWaiting(cmd.Context(), g, st, req, &res, wait); err != nil {
					return err
				}
				return printAcquire(cmd, output, req, &res)
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

// acquireWaiting acquires, retrying contention and, within wait, RETRY_IN.
func acquireWaiting(ctx context.Context, g *globals, st store.Store, req *store.AcquireRequest, res *store.AcquireResult, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for contention := 0; ; {
		req.Now = g.now()
		err := st.Acquire(ctx, req, res)
		if errors.Is(err, store.ErrContention) && contention < 5 {
			contention++
			if err := sleepCtx(ctx, time.Duration(contention)*25*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		if err != nil || res.Granted {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		if err := sleepCtx(ctx, min(left, res.RetryIn)); err != nil {
			return err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

func printAcquire(cmd *cobra.Command, output string, req *store.AcquireRequest, res *store.AcquireResult) error {
	v := acquireView{Outcome: "GRANTED"}
	for _, it := range res.Items {
		v.Dimensions = append(v.Dimensions, acquireItemView{Dimension: it.Dimension, Type: it.Type.String(), Cost: it.Cost,
			Capacity: it.Capacity, Remaining: float64(it.Remaining) / 1000, RetryInMs: it.RetryIn.Milliseconds()})
	}
	if res.Granted {
		l := leaseView{ID: req.ID.String(), Caller: req.Caller, CreatedAt: req.Now.UTC(), ExpiresAt: res.ExpiresAt.UTC()}
		for _, it := range res.Items {
			l.Dimensions = append(l.Dimensions, itemView{Dimension: it.Dimension, Cost: it.Cost})
		}
		v.Lease = &l
	} else {
		v.Outcome, v.RetryInMs = "RETRY_IN", max(1, res.RetryIn.Milliseconds())
	}
	w := cmd.OutOrStdout()
	var err error
	if output == "json" {
		err = writeJSON(w, v)
	} else {
		if v.Lease != nil {
			fmt.Fprintf(w, "GRANTED lease %s expires %s\n", v.Lease.ID, v.Lease.ExpiresAt.Format(time.RFC3339Nano))
		} else {
			fmt.Fprintf(w, "RETRY_IN %s\n", dur(res.RetryIn))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "DIMENSION\tTYPE\tCOST\tCAPACITY\tREMAINING\tRETRY_IN")
		for _, it := range res.Items {
			ri := "-"
			if it.RetryIn > 0 {
				ri = dur(it.RetryIn)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", it.Dimension, it.Type, it.Cost, it.Capacity, milli(it.Remaining), ri)
		}
		err = tw.Flush()
	}
	if err != nil || res.Granted {
		return err
	}
	var short []string
	for _, it := range res.Items {
		if it.RetryIn > 0 {
			short = append(short, it.Dimension)
		}
	}
	return &RetryError{Msg: fmt.Sprintf("RETRY_IN %s: %s short", dur(res.RetryIn), strings.Join(short, ", "))}
}
