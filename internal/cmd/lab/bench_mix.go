package lab

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/cmd/benchrun"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/store"
)

// runWaits runs the bench once per --wait strategy (poll, then reserve,
// for both), refilling the buckets between runs when --limits or --reset
// asked for full buckets, and returns the verified reports.
func runWaits(ctx context.Context, c *sluice.Client, o benchOptions, cfg benchrun.Config, states []sluice.BucketState,
	slack time.Duration, run func(benchrun.Config) ([]*benchrun.Part, error)) ([]*benchrun.Report, error) {
	waits := []string{o.wait}
	if o.wait == "both" {
		waits = []string{"poll", "reserve"}
	}
	buckets := make([]store.Bucket, len(states))
	for i, s := range states {
		buckets[i] = s.Bucket
	}
	full := o.reset || o.limits != ""
	var reps []*benchrun.Report
	for i, w := range waits {
		if i > 0 && full {
			for _, b := range buckets {
				if err := c.PutBucket(ctx, b, sluice.ResetTokens()); err != nil {
					return nil, err
				}
			}
		}
		cfg.Wait = w
		parts, err := run(cfg)
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("bench interrupted: %w", err)
		}
		rep, err := benchrun.Merge(parts, buckets, cfg, slack)
		if err != nil {
			return nil, err
		}
		if b := states[0]; len(cfg.Classes) > 0 && b.Type != bucket.Concurrent && b.RefillPeriod > 0 {
			tokens := b.Tokens.Tokens()
			if full {
				tokens = float64(b.Capacity)
			}
			perSecond := float64(b.RefillAmount) / b.RefillPeriod.Seconds()
			rep.CompareFCFS(benchrun.FCFS(cfg.Classes, float64(b.Capacity), perSecond, tokens, cfg.Duration))
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

// writeClasses prints the per-class table of a run with several classes.
func writeClasses(w io.Writer, r *benchrun.Report) error {
	if len(r.Classes) < 2 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\tWORKERS\tGRANTS\tTOKEN SHARE\tWAIT P50\tWAIT P99\tWAIT MAX\tLAG P99\tTIMEOUTS\tCUT AT END\tCALLS/GRANT\tFCFS/WORKER\tWORST WORKER VS FCFS")
	for _, c := range r.Classes {
		fcfs, ratio := "-", "-"
		if c.FCFS > 0 {
			fcfs, ratio = fmt.Sprintf("%.1f", c.FCFS), fmt.Sprintf("%.0f%%", 100*c.FCFSRatio)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\t%s\t%s\t%s\t%s\t%d\t%d\t%.2f\t%s\t%s\n", c.Name, c.Workers, c.Granted, 100*c.TokenShare,
			lat(c.WaitP50.D()), lat(c.WaitP99.D()), lat(c.WaitMax.D()), lat(c.LagP99.D()), c.Timeouts, c.Cut, c.CallsPerGrant, fcfs, ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "CUT AT END: waits still without a slot when the run ended (polling), or whose slot would come after it (reserving)")
	fmt.Fprintln(w, "LAG: how long after the store's valid instant for it (a reservation's, or a grant's decision time) a worker got its slot")
	_, err := fmt.Fprintln(w, "FCFS/WORKER: a worker's grants from a strict first-come-first-served queue over the run, with no round-trip time")
	return err
}

// writeComparison prints one line per --wait run of --wait both.
func writeComparison(w io.Writer, reps []*benchrun.Report) error {
	fmt.Fprintln(w, "\ncomparison:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WAIT\tGRANTS\tTIMEOUTS\tSTORE CALLS\tCALLS/GRANT\tUTILISATION\tOVER-ADMISSION")
	for _, r := range reps {
		util, over := "-", int64(0)
		if d := r.Verdict.Dimensions; len(d) > 0 {
			util = fmt.Sprintf("%.1f%%", 100*d[0].Utilisation)
			for _, x := range d {
				over = max(over, x.WorstExcess)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%s\t%s\n", r.Wait, r.Granted, r.Timeouts, r.Calls, r.CallsPerGrant, util, clikit.Milli(over))
	}
	return tw.Flush()
}
