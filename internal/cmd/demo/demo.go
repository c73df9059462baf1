// Package demo implements the demo: simulated workers sharing OpenAI and
// ElevenLabs limits on the in-memory store, checked afterwards against
// the limits. It runs as sluice-demo, which links only the memory store
// and so builds in seconds, and as 'sluice-lab demo'.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/cmd/verify"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// Opener opens the store the demo runs on, a memory store, and returns
// it with the function that closes it.
type Opener func(ctx context.Context) (store.Store, func() error, error)

// Main runs sluice-demo's command line args against env, on env.Memory
// or a fresh memory store, and returns the exit code, printing any error
// to env.Stderr in one line.
func Main(ctx context.Context, args []string, env clikit.Env) int {
	root := NewCommand("sluice-demo", func(context.Context) (store.Store, func() error, error) {
		if env.Memory != nil {
			return env.Memory, func() error { return nil }, nil
		}
		ms := memstore.New()
		return ms, ms.Close, nil
	})
	root.Version = clikit.ReadVersion(env.BuildInfo).Short()
	root.SetVersionTemplate("sluice-demo {{.Version}}\n")
	clikit.Configure(root, env)
	return clikit.Run(ctx, root, args, env, nil)
}

// NewCommand returns the demo command, named use, on the store open
// returns.
func NewCommand(use string, open Opener) *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   use,
		Short: "Simulate workers sharing OpenAI and ElevenLabs limits, and verify no limit was exceeded",
		Long: `demo runs simulated workers on the in-memory store for a while. About 60 %
call a simulated OpenAI chat API: each call reserves 1 request on openai#rpm
and an estimate of 60-160 tokens on openai#tpm, all-or-nothing, then settles
the tokens to the actual usage (70-130 % of the estimate; above it the bucket
goes into debt). The others call a simulated ElevenLabs TTS API, holding one
of the elevenlabs#concurrent slots for 50-300 ms. Every worker waits out the
RETRY_IN answers it gets.

Progress goes to stderr: one line refreshed every 500 ms on a terminal,
a plain line every second otherwise. At the end a table on stdout gives,
per dimension, the limit, the grants, the RETRY_IN answers, the peak in
flight, the utilisation and the busiest window, and a verdict computed from
the log of every grant, settlement and release the store applied: for the
token buckets, no window held more than capacity + refill, and for the
concurrent one, no instant held more slots than the limit. The command exits
1 if a limit was exceeded.`,
		Example: strings.ReplaceAll(`  CMD
  CMD --workers 50 --duration 30s --rpm 1200 --concurrent 10
  CMD --duration 3s --progress none --output json`, "CMD", exampleName(use)),
		Args: clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			st, closeStore, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			var p func(tick)
			switch mode := progressMode(o.progress, errw); mode {
			case "tty", "plain":
				p = progressPrinter(errw, mode == "tty", o.duration, o.concurrent)
			}
			if o.output == "table" {
				fmt.Fprintf(errw, "%s: %d workers share %s (%d/min), %s (%d/min) and %s (%d slots) for %s on the memory store\n",
					cmd.CommandPath(), o.workers, dimRPM, o.rpm, dimTPM, o.tpm, dimConc, o.concurrent, o.duration)
			}
			run, err := runDemo(cmd.Context(), o, st, p)
			if p != nil && progressMode(o.progress, errw) == "tty" {
				fmt.Fprintln(errw)
			}
			if err != nil {
				return err
			}
			if o.output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(run); err != nil {
					return err
				}
			} else if err := writeDemoTable(out, run); err != nil {
				return err
			}
			if !run.OK {
				return fmt.Errorf("limit exceeded: %s", run.Report.Exceeded())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.workers, "workers", 20, "simulated workers (60 % chat on OpenAI, 40 % speech on ElevenLabs)")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long the workers run")
	f.Int64Var(&o.rpm, "rpm", 600, "openai#rpm: requests per minute")
	f.Int64Var(&o.tpm, "tpm", 60_000, "openai#tpm: tokens per minute")
	f.Int64Var(&o.concurrent, "concurrent", 5, "elevenlabs#concurrent: simultaneous calls")
	f.StringVarP(&o.output, "output", "o", "table", "report format: table or json")
	f.StringVar(&o.progress, "progress", "auto", "progress on stderr: auto, tty (refreshed line), plain (a line per second) or none")
	return cmd
}

// exampleName is how the examples call the command named use.
func exampleName(use string) string {
	if use == "demo" {
		return "sluice-lab demo"
	}
	return use
}

// progressMode resolves "auto" to "tty" when w is a terminal.
func progressMode(mode string, w io.Writer) string {
	if mode != "auto" {
		return mode
	}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return "tty"
		}
	}
	return "plain"
}

// progressPrinter returns the progress callback: on a terminal it redraws
// one line every tick; otherwise it prints a line every other tick (1 s).
func progressPrinter(w io.Writer, tty bool, total time.Duration, capacity int64) func(tick) {
	n := 0
	return func(t tick) {
		n++
		if !tty && n%2 != 0 {
			return
		}
		c := t.counts
		line := fmt.Sprintf("[%5.1fs/%s] granted: openai %d (%d tok), elevenlabs %d · in flight: %d/%d · RETRY_IN short on rpm %d, tpm %d, tts %d",
			t.elapsed.Seconds(), total, c[dimRPM].Granted, c[dimTPM].Milli/bucket.Milli, c[dimConc].Granted,
			c[dimConc].InFlight/bucket.Milli, capacity, c[dimRPM].Denied, c[dimTPM].Denied, c[dimConc].Denied)
		if tty {
			fmt.Fprint(w, "\r\x1b[K"+line)
		} else {
			fmt.Fprintln(w, line)
		}
	}
}

// writeDemoTable prints the per-dimension table and the verdict.
func writeDemoTable(w io.Writer, run *demoRun) error {
	fmt.Fprintf(w, "\n%d workers (%d chat on OpenAI, %d speech on ElevenLabs) ran %.1fs; %d events recorded\n\n",
		run.Workers, run.ChatWorkers, run.SpeechWorkers, run.Elapsed.D().Seconds(), run.Events)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DIMENSION\tLIMIT\tGRANTED\tRETRY_IN\tUSED\tPEAK IN-FLIGHT\tUTILISATION\tMAX IN ANY WINDOW\tWORST MARGIN\tVERDICT")
	for _, d := range run.Report.Dimensions {
		unit := verify.Unit(d.Config.Type)
		used := fmt.Sprintf("%d %s", d.Consumed/bucket.Milli, unit)
		if d.Config.Type != bucket.Concurrent && d.Allowed > 0 {
			used += " " + allowed(d, run.Report.End.Sub(run.Report.Start))
		}
		peak, window := "-", "-"
		if d.Config.Type == bucket.Concurrent {
			peak = fmt.Sprint(d.PeakInFlight / bucket.Milli)
		} else {
			window = fmt.Sprintf("%d %s / %s", d.MaxWindow/bucket.Milli, unit, periodName(d.Config.RefillPeriod))
		}
		verdict := "ok"
		if !d.OK() {
			verdict = "EXCEEDED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%.1f%%\t%s\t%s %s\t%s\n", d.Name, limitName(d.Config), d.Grants,
			run.Counts[d.Name].Denied, used, peak, 100*d.Utilisation, window, verify.Margin(d.WorstExcess), unit, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if tpm := dimension(run.Report, dimTPM); tpm != nil {
		fmt.Fprintf(w, "\n%s settlements: %d above the estimate (+%d tokens charged, into debt when short), %d below (-%d tokens refunded)\n",
			dimTPM, run.Above, tpm.Charged/bucket.Milli, run.Below, tpm.Refunded/bucket.Milli)
	}
	fmt.Fprintf(w, "worst margin: how far the busiest window ending at a grant stayed below capacity + refill (0 = the limit was used exactly)\n")
	if run.Timeouts > 0 {
		fmt.Fprintf(w, "workers whose last wait ran past the end of the run: %d\n", run.Timeouts)
	}
	if run.OK {
		_, err := fmt.Fprintf(w, "\nverdict: no limit exceeded (checked %d recorded grants, settlements and releases against every window)\n", run.Events)
		return err
	}
	_, err := fmt.Fprintf(w, "\nverdict: LIMIT EXCEEDED: %s\n", run.Report.Exceeded())
	return err
}

func dimension(r *verify.Report, name string) *verify.Dimension {
	for i := range r.Dimensions {
		if r.Dimensions[i].Name == name {
			return &r.Dimensions[i]
		}
	}
	return nil
}

// allowed describes the bound a time-based bucket's use over the run is
// held to, from its configuration and the run's span: "≤ 1201 allowed
// (capacity 600 + 600/min × 60.1 s)".
func allowed(d verify.Dimension, span time.Duration) string {
	rel := "≤"
	if d.Consumed > d.Allowed {
		rel = ">"
	}
	return fmt.Sprintf("%s %d allowed (capacity %d + %d/%s × %.1f s)", rel, d.Allowed/bucket.Milli,
		d.Config.Capacity, d.Config.RefillAmount, periodName(d.Config.RefillPeriod), span.Seconds())
}

func limitName(c bucket.Config) string {
	if c.Type == bucket.Concurrent {
		return fmt.Sprintf("%d concurrent", c.Capacity)
	}
	s := fmt.Sprintf("%d/%s", c.RefillAmount, periodName(c.RefillPeriod))
	if c.Capacity != c.RefillAmount {
		s += fmt.Sprintf(" (burst %d)", c.Capacity)
	}
	return s
}

func periodName(p time.Duration) string {
	switch p {
	case time.Second:
		return "s"
	case time.Minute:
		return "min"
	case time.Hour:
		return "h"
	}
	return p.String()
}
