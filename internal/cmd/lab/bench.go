package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/cmd/benchrun"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/cmd/recorder"
	limitsfile "github.com/ontopix/sluice/limits"
	"github.com/ontopix/sluice/store"
)

type benchOptions struct {
	workers, processes int
	duration, hold     time.Duration
	slack              time.Duration
	dims               []string
	limits, output     string
	reset              bool
	mix, wait          string
	timeout            time.Duration
}

func newBenchCmd(g *globals) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench --dimension DIM[:COST]... [--limits FILE] [--processes P] [--workers N] [--duration D]",
		Short: "Load-test a store from several processes and verify no limit was exceeded",
		Long: `bench runs P child processes (this binary, re-run) with N workers each. Every
worker acquires all the --dimension items at once, all-or-nothing, as fast as
the limits allow, waiting out RETRY_IN answers; a lease with a concurrent item
is held for --hold, then released.

Each process logs every grant and release with the store's decision time; the
parent merges the logs and verifies them: for requests and tokens dimensions,
no window of time held more than capacity + refill over the window; for
concurrent ones, no instant held more slots than the capacity. The report
gives throughput, p50/p99/max acquire latency, per dimension utilisation
(granted ÷ what the limit allowed over the run) and over-admission (the largest
excess over the limit in any window). The exit code is 1 if a limit was
exceeded.

--wait reserve makes workers wait in line (reservations for requests and
tokens, the waiter queue for concurrent slots; a wait longer than --timeout
fails at once); --wait poll (the default) asks, sleeps RETRY_IN plus jitter
and asks again; --wait both runs poll, then reserve, and reports both.
--mix 200x20,5000x2 runs classes of requests of different sizes on the one
--dimension (20 workers asking for 200 tokens, 2 for 5000) and reports per
class grants, share of tokens, wait p50/p99/max, timeouts, store calls per
grant, and how each class fared against a strict first-come-first-served
queue.

--limits FILE creates the buckets first (apply --reset); --reset refills the
named buckets before the run (and before each run of --wait both). On memory:// the workers run in this process
(--processes must be 1). With Redis's own clock every process shares one
clock; with caller_clock=true, --slack widens the windows (default 10ms).`,
		Example: `  sluice-lab bench --store redis://127.0.0.1:6379/0 --limits docs/examples/limits.yaml \
      --dimension openai#gpt-4o#rpm --dimension openai#gpt-4o#tpm:50 --processes 4 --workers 8 --duration 10s
  sluice-lab bench --store memory:// --limits limits.yaml --dimension elevenlabs#concurrent --hold 20ms --processes 1`,
		Args: clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, g, o) },
	}
	f := cmd.Flags()
	f.IntVar(&o.workers, "workers", 8, "workers per process")
	f.IntVar(&o.processes, "processes", 4, "child processes")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long the workers run")
	f.StringArrayVar(&o.dims, "dimension", nil, "DIM[:COST] every acquisition takes (repeat for several, all-or-nothing)")
	f.StringVar(&o.limits, "limits", "", "limits file to apply (with --reset) before the run")
	f.BoolVar(&o.reset, "reset", false, "refill the dimensions' buckets before the run")
	f.DurationVar(&o.hold, "hold", 20*time.Millisecond, "how long a lease with a concurrent dimension is held")
	f.DurationVar(&o.slack, "slack", -1, "clock disagreement allowed between processes (default 0 on a shared store clock, else 10ms)")
	f.StringVarP(&o.output, "output", "o", "table", "report format: table or json")
	f.StringVar(&o.mix, "mix", "", "classes COSTxWORKERS[,COSTxWORKERS]... on the one --dimension, e.g. 200x20,5000x2 (replaces --workers)")
	f.StringVar(&o.wait, "wait", "poll", "how workers wait: poll, reserve, or both (one run of each, compared)")
	f.DurationVar(&o.timeout, "timeout", benchrun.DefaultTimeout, "each wait's timeout")
	addVendorBench(cmd, g)
	return cmd
}

// benchMark is in the names of buckets meant for benchmarks only
// ("bench#rpm", "openai#bench#tpm", "elevenlabs-bench#concurrent"): bench
// warns before draining a shared store's bucket without it.
const benchMark = "bench"

func runBench(cmd *cobra.Command, g *globals, o benchOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	items, err := clikit.ParseItems(o.dims)
	if err != nil {
		return err
	}
	ctx, errw := cmd.Context(), cmd.ErrOrStderr()
	log, err := g.Logger(errw)
	if err != nil {
		return &clikit.UsageError{Err: err}
	}
	op, err := g.Open(ctx)
	if err != nil {
		return err
	}
	defer op.Close()
	if op.Kind == "memory" {
		if cmd.Flags().Changed("processes") && o.processes != 1 {
			return clikit.Usagef("--processes %d: memory:// lives in one process: run bench on it with --processes 1 (the default there), or use a shared store", o.processes)
		}
		o.processes = 1
	}
	c, err := g.Client(op.Store, log)
	if err != nil {
		return err
	}
	cfg, states, err := prepareBench(ctx, c, o, items)
	if err != nil {
		return err
	}
	cfg.StoreClock = op.Kind != "memory" && op.SharedClock
	if op.Kind != "memory" || g.Env.Memory != nil {
		warnShared(errw, states)
	}
	buckets := make([]store.Bucket, len(states))
	for i, s := range states {
		buckets[i] = s.Bucket
	}
	slack := o.slack
	if slack < 0 {
		slack = 0
		if !op.SharedClock {
			slack = 10 * time.Millisecond
		}
	}
	if o.output == "table" {
		fmt.Fprintf(errw, "sluice-lab bench: %d process(es) × %d workers for %s on %s, acquiring %v\n",
			o.processes, cfg.TotalWorkers(), o.duration, op.Redacted, o.dims)
	}
	run := func(cfg benchrun.Config) ([]*benchrun.Part, error) {
		if op.Kind == "memory" {
			return benchInProcess(ctx, g, op.Store, log, o, cfg, errw)
		}
		return runChildren(ctx, g, o, cfg, errw)
	}
	reps, err := runWaits(ctx, c, o, cfg, states, slack, run)
	if err != nil {
		return err
	}
	return reportBench(cmd, o, reps, op.Redacted)
}

// validate checks bench's flags.
func (o *benchOptions) validate() error {
	switch {
	case o.workers < 1 || o.workers > 10_000:
		return clikit.Usagef("--workers %d: must be between 1 and 10000", o.workers)
	case o.processes < 1 || o.processes > 256:
		return clikit.Usagef("--processes %d: must be between 1 and 256", o.processes)
	case o.duration < 100*time.Millisecond || o.duration > 24*time.Hour:
		return clikit.Usagef("--duration %s: must be between 100ms and 24h", o.duration)
	case len(o.dims) == 0:
		return clikit.Usagef("name what to acquire with --dimension DIM[:COST]")
	case o.hold < 0:
		return clikit.Usagef("--hold %s: must not be negative", o.hold)
	case o.wait != "poll" && o.wait != "reserve" && o.wait != "both":
		return clikit.Usagef("--wait %q: must be poll, reserve or both", o.wait)
	case o.timeout < time.Millisecond || o.timeout > store.MaxReserveWait:
		return clikit.Usagef("--timeout %s: must be between 1ms and %s", o.timeout, store.MaxReserveWait)
	case o.mix != "" && len(o.dims) != 1:
		return clikit.Usagef("--mix: name exactly one --dimension (its costs come from the mix), not %d", len(o.dims))
	}
	return clikit.OutputFlag(o.output)
}

// prepareBench applies --limits or --reset and returns the run's
// configuration, with every cost resolved (a dimension named without one
// costs its bucket's cost per call), and the buckets it acquires from as
// they were before the run.
func prepareBench(ctx context.Context, c *sluice.Client, o benchOptions, items []store.Item) (benchrun.Config, []sluice.BucketState, error) {
	cfg := benchrun.Config{Items: items, Workers: o.workers, Duration: o.duration, Hold: o.hold, TTL: time.Minute, Timeout: o.timeout}
	if o.mix != "" {
		classes, err := benchrun.ParseMix(o.mix, items[0].Dimension)
		if err != nil {
			return cfg, nil, clikit.Usagef("%v", err)
		}
		cfg.Classes = classes
	}
	if o.limits != "" {
		lf, err := limitsfile.Load(o.limits)
		if err != nil {
			return cfg, nil, err
		}
		for _, b := range lf.Buckets() {
			if err := c.PutBucket(ctx, b, sluice.ResetTokens()); err != nil {
				return cfg, nil, err
			}
		}
	}
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.Dimension
	}
	states, err := c.Peek(ctx, names...)
	if err != nil {
		return cfg, nil, err
	}
	for i, s := range states {
		cfg.Concurrent = cfg.Concurrent || s.Type == bucket.Concurrent
		if items[i].Cost == 0 {
			items[i].Cost = s.Config.Cost()
		}
		if o.reset && o.limits == "" {
			if err := c.PutBucket(ctx, s.Bucket, sluice.ResetTokens()); err != nil {
				return cfg, nil, err
			}
		}
	}
	return cfg, states, nil
}

// benchInProcess runs the workers in this process, through a recorder that
// serialises the store so that decision order and decision time agree.
func benchInProcess(ctx context.Context, g *globals, st store.Store, log *slog.Logger, o benchOptions, cfg benchrun.Config, errw io.Writer) ([]*benchrun.Part, error) {
	var live benchrun.Counters
	c, err := g.Client(live.Wrap(recorder.New(st)), log)
	if err != nil {
		return nil, err
	}
	stop := progress(ctx, errw, o, func() progressLine {
		return progressLine{live.Granted.Load(), live.Denied.Load(), live.Errors.Load()}
	})
	p, err := benchrun.Run(ctx, c, cfg, &live)
	stop()
	if err != nil {
		return nil, err
	}
	return []*benchrun.Part{p}, nil
}

// reportBench prints the reports (one per --wait run) and turns their
// verdicts into the exit code.
func reportBench(cmd *cobra.Command, o benchOptions, reps []*benchrun.Report, where string) error {
	var err error
	switch {
	case o.output == "json" && len(reps) == 1:
		err = clikit.WriteJSON(cmd.OutOrStdout(), reps[0])
	case o.output == "json":
		both := map[string]*benchrun.Report{}
		for _, r := range reps {
			both[r.Wait] = r
		}
		err = clikit.WriteJSON(cmd.OutOrStdout(), both)
	default:
		for _, r := range reps {
			if err = writeBench(cmd.OutOrStdout(), r, where); err != nil {
				break
			}
		}
		if err == nil && len(reps) > 1 {
			err = writeComparison(cmd.OutOrStdout(), reps)
		}
	}
	if err != nil {
		return err
	}
	which := func(rep *benchrun.Report) string {
		if len(reps) > 1 {
			return " (--wait " + rep.Wait + ")"
		}
		return ""
	}
	for _, rep := range reps {
		if !rep.OK {
			return fmt.Errorf("limit exceeded%s: %s", which(rep), rep.Verdict.Exceeded())
		}
	}
	for _, rep := range reps {
		if rep.Errors > 0 {
			return fmt.Errorf("%d store errors during the run%s; first: %s", rep.Errors, which(rep), rep.FirstErr)
		}
	}
	return nil
}

// progress prints live totals to stderr every second until stop is called,
// with the rate granted over the last second.
func progress(ctx context.Context, w io.Writer, o benchOptions, read func() progressLine) (stop func()) {
	if o.output != "table" {
		return func() {}
	}
	tty := clikit.IsTerminal(w)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		r := rateMeter{start: time.Now()}
		r.last = r.start
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprintln(w)
				}
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				line := r.line(now, read(), o.duration)
				if tty {
					fmt.Fprint(w, "\r\x1b[K"+line)
				} else {
					fmt.Fprintln(w, line)
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// rateMeter turns cumulative totals into progress lines showing the rate
// over the interval since the previous line.
type rateMeter struct {
	start, last time.Time
	granted     int64
}

func (r *rateMeter) line(now time.Time, p progressLine, total time.Duration) string {
	rate := 0.0
	if d := now.Sub(r.last).Seconds(); d > 0 {
		rate = float64(p.Granted-r.granted) / d
	}
	r.last, r.granted = now, p.Granted
	return fmt.Sprintf("[%4.1fs/%s] granted %d (now %.0f/s) · RETRY_IN %d · errors %d",
		now.Sub(r.start).Seconds(), total, p.Granted, rate, p.Denied, p.Errors)
}

// warnShared warns when the run drains buckets other callers may be using:
// names without "bench" in them, or buckets that held leases before the
// run.
func warnShared(w io.Writer, states []sluice.BucketState) {
	var named, leased []string
	for _, s := range states {
		if !strings.Contains(s.Name, benchMark) {
			named = append(named, s.Name)
		}
		if s.ActiveLeases > 0 {
			leased = append(leased, fmt.Sprintf("%s (%d)", s.Name, s.ActiveLeases))
		}
	}
	if len(named) > 0 {
		fmt.Fprintf(w, "sluice-lab: warning: bench drains %s, not named as a benchmark bucket (no %q in the name): callers sharing "+
			"this store are denied while it runs (use buckets such as openai#%s#rpm)\n", strings.Join(named, ", "), benchMark, benchMark)
	}
	if len(leased) > 0 {
		fmt.Fprintf(w, "sluice-lab: warning: bench drains buckets that hold leases before it starts: %s; "+
			"their holders compete with it, and the verdict counts only the bench's own grants\n", strings.Join(leased, ", "))
	}
}

// runChildren re-runs this binary as o.processes bench-child processes and
// collects their parts.
func runChildren(ctx context.Context, g *globals, o benchOptions, cfg benchrun.Config, errw io.Writer) ([]*benchrun.Part, error) {
	exe := g.Env.Executable
	if exe == nil {
		exe = os.Executable
	}
	path, err := exe()
	if err != nil {
		return nil, fmt.Errorf("bench: cannot find the sluice binary to run children: %w", err)
	}
	dir, err := os.MkdirTemp("", "sluice-bench-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cj, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	lines := make([]atomic.Pointer[progressLine], o.processes)
	stop := progress(ctx, errw, o, func() progressLine {
		var sum progressLine
		for i := range lines {
			if p := lines[i].Load(); p != nil {
				sum.Granted += p.Granted
				sum.Denied += p.Denied
				sum.Errors += p.Errors
			}
		}
		return sum
	})
	defer stop()
	errs := make([]error, o.processes)
	var wg sync.WaitGroup
	for i := range o.processes {
		out := filepath.Join(dir, "part-"+strconv.Itoa(i)+".json")
		args := []string{"bench-child", "--store", g.Store, "--config", string(cj), "--out", out}
		if g.PasswordFile != "" {
			args = append(args, "--password-file", g.PasswordFile)
		}
		c := exec.CommandContext(ctx, path, args...)
		stdout, err := c.StdoutPipe()
		if err != nil {
			return nil, err
		}
		var stderr lockedBuffer
		c.Stderr = &stderr
		if err := c.Start(); err != nil {
			return nil, fmt.Errorf("bench: start child: %w", err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var p progressLine
				if json.Unmarshal(sc.Bytes(), &p) == nil {
					lines[i].Store(&p)
				}
			}
			if err := c.Wait(); err != nil {
				errs[i] = fmt.Errorf("bench: child %d: %w: %s", i, err, stderr.String())
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	parts := make([]*benchrun.Part, o.processes)
	for i := range parts {
		b, err := os.ReadFile(filepath.Join(dir, "part-"+strconv.Itoa(i)+".json"))
		if err != nil {
			return nil, fmt.Errorf("bench: child %d wrote no result: %w", i, err)
		}
		parts[i] = &benchrun.Part{}
		if err := json.Unmarshal(b, parts[i]); err != nil {
			return nil, fmt.Errorf("bench: child %d: %w", i, err)
		}
	}
	return parts, nil
}

// lockedBuffer collects a child's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.b) < 4096 {
		l.b = append(l.b, p...)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
