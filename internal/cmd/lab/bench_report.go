package lab

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/cmd/benchrun"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/cmd/verify"
)

// writeBench prints the bench report.
func writeBench(w io.Writer, r *benchrun.Report, where string) error {
	fmt.Fprintf(w, "\n%d process(es) × %d workers on %s ran %.1fs, waiting with --wait %s\n", r.Processes, r.Workers, where, r.Elapsed.D().Seconds(), r.Wait)
	fmt.Fprintf(w, "acquisitions: %d granted (%.1f/s), %d RETRY_IN, %d timeouts, %d errors\n", r.Granted, r.Throughput, r.Denied, r.Timeouts, r.Errors)
	fmt.Fprintf(w, "store calls: %d (%.2f per grant)\n", r.Calls, r.CallsPerGrant)
	fmt.Fprintf(w, "decision latency: p50 %s, p99 %s, max %s (%d acquire and reserve calls)\n\n", lat(r.P50.D()), lat(r.P99.D()), lat(r.Max.D()), r.Acquires)
	if len(r.Classes) == 1 {
		c := r.Classes[0]
		fmt.Fprintf(w, "wait for a slot: p50 %s, p99 %s, max %s; lag after the valid instant: p50 %s, p99 %s, max %s\n\n",
			lat(c.WaitP50.D()), lat(c.WaitP99.D()), lat(c.WaitMax.D()), lat(c.LagP50.D()), lat(c.LagP99.D()), lat(c.LagMax.D()))
	}
	if err := writeClasses(w, r); err != nil {
		return err
	}
	if len(r.Classes) > 1 {
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DIMENSION\tLIMIT\tGRANTS\tUSED\tALLOWED\tUTILISATION\tMAX IN ANY WINDOW\tOVER-ADMISSION\tVERDICT")
	for _, d := range r.Verdict.Dimensions {
		unit := verify.Unit(d.Config.Type)
		allowed, window := "-", "-"
		if d.Config.Type == bucket.Concurrent {
			window = fmt.Sprintf("%d %s at once", d.PeakInFlight/bucket.Milli, unit)
		} else {
			allowed = fmt.Sprintf("%s %s", clikit.Milli(d.Allowed), unit)
			window = fmt.Sprintf("%s %s / %s", clikit.Milli(d.MaxWindow), unit, clikit.PeriodString(d.Config.RefillPeriod))
		}
		over := max(0, d.WorstExcess)
		verdict := "ok"
		if !d.OK() {
			verdict = "EXCEEDED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s %s\t%s\t%.1f%%\t%s\t%s %s\t%s\n", d.Name, clikit.RateString(d.Config), d.Grants,
			clikit.Milli(d.Consumed), unit, allowed, 100*d.Utilisation, window, clikit.Milli(over), unit, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nutilisation: granted ÷ capacity + refill over the run (concurrent: mean share of slots held)")
	fmt.Fprintln(w, "over-admission: the largest excess over capacity + refill in any window ending at a grant (concurrent: slots above capacity)")
	if r.Slack > 0 {
		fmt.Fprintf(w, "windows widened by %s for clock disagreement between processes\n", r.Slack.D())
	}
	if r.OK {
		_, err := fmt.Fprintf(w, "\nverdict: no limit exceeded (%d grants and releases from %d process(es) checked against every window)\n", r.Events, r.Processes)
		return err
	}
	_, err := fmt.Fprintf(w, "\nverdict: LIMIT EXCEEDED: %s\n", r.Verdict.Exceeded())
	return err
}

func lat(d time.Duration) string {
	return d.Round(time.Microsecond).String()
}
