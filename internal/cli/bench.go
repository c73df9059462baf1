package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/benchrun"
	"github.com/ontopix/sluice/internal/recorder"
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

--limits FILE creates the buckets first (apply --reset); --reset refills the
named buckets before the run. On memory:// the workers run in this process
(--processes must be 1). With Redis's own clock every process shares one
clock; with caller_clock=true, --slack widens the windows (default 10ms).`,
		Example: `  sluice bench --store redis://127.0.0.1:6379/0 --limits docs/examples/limits.yaml \
      --dimension openai#gpt-4o#rpm --dimension openai#gpt-4o#tpm:50 --processes 4 --workers 8 --duration 10s
  sluice bench --store memory:// --limits limits.yaml --dimension elevenlabs#concurrent --hold 20ms --processes 1`,
		Args: noArgs,
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
	return cmd
}

func runBench(cmd *cobra.Command, g *globals, o benchOptions) error {
	switch {
	case o.workers < 1 || o.workers > 10_000:
		return usagef("--workers %d: must be between 1 and 10000", o.workers)
	case o.processes < 1 || o.processes > 256:
		return usagef("--processes %d: must be between 1 and 256", o.processes)
	case o.duration < 100*time.Millisecond || o.duration > 24*time.Hour:
		return usagef("--duration %s: must be between 100ms and 24h", o.duration)
	case len(o.dims) == 0:
		return usagef("name what to acquire with --dimension DIM[:COST]")
	case o.hold < 0:
		return usagef("--hold must not be negative")
	}
	if err := outputFlag(o.output); err != nil {
		return err
	}
	items, err := parseItems(o.dims)
	if err != nil {
		return err
	}
	ctx, errw := cmd.Context(), cmd.ErrOrStderr()
	op, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer op.Close()
	st := op.Store
	if op.Kind == "memory" && o.processes != 1 {
		return usagef("memory:// lives in one process: run bench on it with --processes 1, or use a shared store")
	}
	if o.limits != "" {
		lf, err := limitsfile.Load(o.limits)
		if err != nil {
			return err
		}
		for _, b := range lf.Buckets() {
			if err := st.PutBucket(ctx, store.PutBucketRequest{Now: g.now(), Bucket: b, Reset: true}); err != nil {
				return err
			}
		}
	}
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.Dimension
	}
	states, err := st.Peek(ctx, store.PeekRequest{Now: g.now(), Dimensions: names})
	if err != nil {
		return err
	}
	cfg := benchrun.Config{Items: items, Workers: o.workers, Duration: o.duration, Hold: o.hold, TTL: time.Minute,
		StoreClock: op.Kind != "memory" && op.SharedClock}
	buckets := make([]store.Bucket, len(states))
	for i, s := range states {
		buckets[i] = s.Bucket
		cfg.Concurrent = cfg.Concurrent || s.Type == bucket.Concurrent
		if o.reset && o.limits == "" {
			if err := st.PutBucket(ctx, store.PutBucketRequest{Now: g.now(), Bucket: s.Bucket, Reset: true}); err != nil {
				return err
			}
		}
	}
	slack := o.slack
	if slack < 0 {
		slack = 0
		if !op.SharedClock {
			slack = 10 * time.Millisecond
		}
	}
	if o.output == "table" {
		fmt.Fprintf(errw, "sluice bench: %d process(es) × %d workers for %s on %s, acquiring %v\n",
			o.processes, o.workers, o.duration, op.Redacted, o.dims)
	}
	var parts []*benchrun.Part
	if op.Kind == "memory" {
		// One process: the recorder serialises the store so that decision
		// order and decision time agree.
		var live benchrun.Counters
		stop := progress(ctx, errw, o, func() progressLine {
			return progressLine{live.Granted.Load(), live.Denied.Load(), live.Errors.Load()}
		})
		p, err := benchrun.Run(ctx, recorder.New(st), cfg, &live)
		stop()
		if err != nil {
			return err
		}
		parts = []*benchrun.Part{p}
	} else if parts, err = runChildren(ctx, g, o, cfg, errw); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bench interrupted: %w", err)
	}
	rep, err := benchrun.Merge(parts, buckets, items, o.workers, slack)
	if err != nil {
		return err
	}
	if o.output == "json" {
		err = writeJSON(cmd.OutOrStdout(), rep)
	} else {
		err = writeBench(cmd.OutOrStdout(), rep, op.Redacted)
	}
	if err != nil {
		return err
	}
	if !rep.OK {
		return fmt.Errorf("limit exceeded: %s", exceeded(rep.Verdict))
	}
	if rep.Errors > 0 {
		return fmt.Errorf("%d store errors during the run; first: %s", rep.Errors, rep.FirstErr)
	}
	return nil
}

// progress prints live totals to stderr every second until stop is called.
func progress(ctx context.Context, w io.Writer, o benchOptions, read func() progressLine) (stop func()) {
	if o.output != "table" {
		return func() {}
	}
	tty := isTerminal(w)
	done := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprintln(w)
				}
				return
			case <-ctx.Done():
				return
			case <-t.C:
				p := read()
				line := fmt.Sprintf("[%4.1fs/%s] granted %d (%.0f/s) · RETRY_IN %d · errors %d",
					time.Since(start).Seconds(), o.duration, p.Granted, float64(p.Granted)/time.Since(start).Seconds(), p.Denied, p.Errors)
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

// runChildren re-runs this binary as o.processes bench-child processes and
// collects their parts.
func runChildren(ctx context.Context, g *globals, o benchOptions, cfg benchrun.Config, errw io.Writer) ([]*benchrun.Part, error) {
	exe := g.env.Executable
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
		args := []string{"bench-child", "--store", g.store, "--config", string(cj), "--out", out}
		if g.passwordFile != "" {
			args = append(args, "--password-file", g.passwordFile)
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
