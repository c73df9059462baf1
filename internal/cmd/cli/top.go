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
bar, the debt it owes, the lease records it holds, how long until it is full
again, and the time left in a running cooldown. The header sums the leases,
the buckets cooling down and those in debt.

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
			return g.WithClient(cmd, false, func(c *sluice.Client) error {
				return runTop(cmd.Context(), g, c, args, o, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.interval, "interval", time.Second, "time between frames")
	f.BoolVar(&o.once, "once", false, "print one frame and exit")
	f.IntVar(&o.count, "count", 0, "stop after this many frames (0: until interrupted)")
	return cmd
}

// runTop draws frames until ctx ends, --once or --count.
func runTop(ctx context.Context, g *globals, c *sluice.Client, dims []string, o *topOptions, w io.Writer) error {
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
		if err := topFrame(ctx, g, c, dims, o.interval, &frame); err != nil {
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
func topFrame(ctx context.Context, g *globals, c *sluice.Client, dims []string, every time.Duration, w io.Writer) error {
	views, err := readViews(ctx, c, dims)
	if err != nil {
		return err
	}
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DIMENSION\tTYPE\tLIMIT\tLEVEL\tFILL\t\tDEBT\tLEASES\tFULL IN\tCOOLDOWN")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\t%d\t%s\t%s\n", v.Dimension, v.Type, rateOf(v), level,
			fillBar(v.FillPct), v.FillPct, debtCol, v.ActiveLeases, v.timeToFull(), cool)
	}
	return tw.Flush()
}

// fillBar draws pct (0..100) as ten characters.
func fillBar(pct float64) string {
	n := int(pct/10 + 0.5)
	n = min(max(n, 0), 10)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", 10-n) + "]"
}
