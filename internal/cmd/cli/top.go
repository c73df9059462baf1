package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/internal/cmd/clikit"
)

// topOptions are the flags of sluice top.
type topOptions struct {
	interval time.Duration
	once     bool
	count    int
}

func newTopCmd(g *globals) *cobra.Command {
	o := &topOptions{}
	cmd := &cobra.Command{
		Use:   "top [DIMENSION...]",
		Short: "Watch the fleet's buckets live in the terminal, as the console's overview shows them",
		Long: `top redraws the fleet overview every --interval until interrupted: one row
per bucket (or per DIMENSION named) with its level against capacity, a fill
bar, the debt it owes, the line (callers waiting for slots, or how long
until the reservations of callers waiting in line are valid), the lease
records it holds, how long until it is full
again, and the time left in a running cooldown. The header sums the leases,
the buckets cooling down and those in debt. On a store that keeps usage
history (the memory, Redis, PostgreSQL and DynamoDB stores, written by
'sluice serve' and by programs with a history.Recorder), each row adds the
fleet's last complete minute: acquisitions granted and refused, vendor 429s
and the wait p95, read again every 10 s.

It is the terminal's view of the console that 'sluice serve' shows at /ui,
for a box without a browser. --once prints one frame and exits (for scripts
and logs). On a terminal each frame replaces the last; otherwise frames are
separated by a blank line.`,
		Example: `  sluice top
  sluice top --interval 5s openai#rpm openai#tpm
  sluice top --once`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.interval < 100*time.Millisecond {
				return usagef("invalid --interval %s: must be at least 100ms", o.interval)
			}
			if o.count < 0 {
				return usagef("invalid --count %d: must be at least 0", o.count)
			}
			return withTopClient(cmd, g, func(c *sluice.Client, rec *history.Recorder) error {
				return runTop(cmd.Context(), g, c, rec, args, o, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.interval, "interval", time.Second, "time between frames")
	f.BoolVar(&o.once, "once", false, "print one frame and exit")
	f.IntVar(&o.count, "count", 0, "stop after this many frames (0: until interrupted)")
	return cmd
}

// withTopClient runs f with a Client over the store and a Recorder that
// reads the store's usage history (one that records nothing itself).
func withTopClient(cmd *cobra.Command, g *globals, f func(*sluice.Client, *history.Recorder) error) error {
	log, err := g.Logger(cmd.ErrOrStderr())
	if err != nil {
		return usagef("%v", err)
	}
	op, err := g.Open(cmd.Context())
	if err != nil {
		return err
	}
	defer op.Close()
	c, err := g.Client(op.Store, log)
	if err != nil {
		return err
	}
	defer c.Close()
	rec, err := history.New(op.Store, history.WithClock(g.Clock()))
	if err != nil {
		return err
	}
	return f(c, rec)
}

// runTop draws frames until ctx ends, --once or --count.
func runTop(ctx context.Context, g *globals, c *sluice.Client, rec *history.Recorder, dims []string, o *topOptions, w io.Writer) error {
	fleet := &fleetMinute{rec: rec}
	tty := clikit.IsTerminal(w) && !o.once
	t := time.NewTicker(o.interval)
	defer t.Stop()
	for n := 1; ; n++ {
		var frame bytes.Buffer
		if tty {
			frame.WriteString("\x1b[H\x1b[2J") // home, clear: the frame replaces the last
		} else if n > 1 {
			frame.WriteString("\n")
		}
		if err := topFrame(ctx, g, c, fleet, dims, o.interval, &frame); err != nil {
			return err
		}
		if _, err := w.Write(frame.Bytes()); err != nil {
			return err
		}
		if o.once || (o.count > 0 && n >= o.count) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// topFrame writes one frame: a header and one row per bucket.
func topFrame(ctx context.Context, g *globals, c *sluice.Client, fleet *fleetMinute, dims []string, every time.Duration, w io.Writer) error {
	views, err := readViews(ctx, c, dims)
	if err != nil {
		return err
	}
	counts, minute := fleet.read(ctx, g.Now(), views)
	var leases, cooling, debt int
	for _, v := range views {
		leases += v.ActiveLeases
		if v.CooldownUntil != nil {
			cooling++
		}
		if v.TokensMilli < 0 {
			debt++
		}
	}
	fmt.Fprintf(w, "sluice top  %s  every %s\n%d buckets  %d leases  %d cooling down  %d in debt\n\n",
		g.Now().UTC().Format(time.RFC3339), every, len(views), leases, cooling, debt)
	if len(views) == 0 {
		_, err := fmt.Fprintln(w, "no buckets (create them with 'sluice limits apply -f limits.yaml' or 'sluice bucket put')")
		return err
	}
	if counts != nil {
		fmt.Fprintf(w, "GRANTED, REFUSED, 429s and WAIT P95: the fleet's minute from %s\n\n", minute.Format("15:04"))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "DIMENSION\tTYPE\tLIMIT\tLEVEL\tFILL\t\tDEBT\tQUEUE\tLEASES\tFULL IN\tCOOLDOWN")
	if counts != nil {
		fmt.Fprint(tw, "\tGRANTED\tREFUSED\t429s\tWAIT P95")
	}
	fmt.Fprintln(tw)
	for _, v := range views {
		level := clikit.Milli(max(v.TokensMilli, 0)) + "/" + clikit.Itoa(v.Capacity)
		debtCol := "-"
		if v.TokensMilli < 0 {
			debtCol = clikit.Milli(-v.TokensMilli)
		}
		cool := "-"
		if v.CooldownUntil != nil {
			cool = clikit.Dur(v.CooldownUntil.Sub(v.At)) + " left"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t%d\t%s\t%s", v.Dimension, v.Type, rateOf(v), level,
			fillBar(v.FillPct), v.FillPct, debtCol, v.queue(), v.ActiveLeases, v.timeToFull(), cool)
		if counts != nil {
			n := counts[v.Dimension]
			r429 := n.Responses[history.Class429Req] + n.Responses[history.Class429Tokens] + n.Responses[history.Class429Other]
			fmt.Fprintf(tw, "\t%d\t%d\t%d\t%s", n.Grants, n.Refusals, r429, waitP95(n.WaitHist))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// fillBar draws pct (0..100) as ten characters.
func fillBar(pct float64) string {
	n := int(pct/10 + 0.5)
	n = min(max(n, 0), 10)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", 10-n) + "]"
}

// fleetMinute reads the fleet's last complete minute per dimension from
// the store's usage history, at most once per flush interval (the rows
// change no more often) and once per minute.
type fleetMinute struct {
	rec    *history.Recorder
	at     time.Time // when counts were read; zero: never
	minute time.Time
	counts map[string]history.Counts
}

// read returns the counts of the minute before now's, per dimension of
// views, and that minute's start; nil when the store keeps no usage
// history, or it could not be read.
func (f *fleetMinute) read(ctx context.Context, now time.Time, views []bucketView) (map[string]history.Counts, time.Time) {
	if !f.rec.Writes() {
		return nil, time.Time{}
	}
	minute := now.Truncate(time.Minute).Add(-time.Minute)
	if f.counts != nil && minute.Equal(f.minute) && now.Sub(f.at) < history.DefaultFlushEvery && len(f.counts) == len(views) {
		return f.counts, f.minute
	}
	counts := make(map[string]history.Counts, len(views))
	for _, v := range views {
		pts, err := f.rec.Query(ctx, history.Query{Dimension: v.Dimension, From: minute, To: minute.Add(time.Minute), Step: time.Minute})
		if err != nil {
			return nil, time.Time{}
		}
		if len(pts) > 0 {
			counts[v.Dimension] = pts[0].Counts
		}
	}
	f.at, f.minute, f.counts = now, minute, counts
	return counts, minute
}

// waitP95 is the 95th percentile of a wait histogram over
// history.WaitBounds, as its bucket's upper bound; "-" when empty.
func waitP95(hist []int64) string {
	var n int64
	for _, c := range hist {
		n += c
	}
	if n == 0 {
		return "-"
	}
	want, cum := (n*95+99)/100, int64(0)
	for i, c := range hist {
		if cum += c; cum >= want && i < len(history.WaitBounds) {
			return "<=" + clikit.Dur(history.WaitBounds[i])
		}
	}
	return ">" + clikit.Dur(history.WaitBounds[len(history.WaitBounds)-1])
}
