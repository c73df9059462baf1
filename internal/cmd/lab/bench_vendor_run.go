package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// runVendorBench runs every mode one after the other and prints a report
// per mode.
func runVendorBench(cmd *cobra.Command, g *globals, o vendorBenchOptions) error {
	flags := cmd.Flags()
	cfg, err := o.config(flags)
	if err != nil {
		return err
	}
	var bo benchOptions
	bo.workers, _ = flags.GetInt("workers")
	bo.processes, _ = flags.GetInt("processes")
	bo.duration, _ = flags.GetDuration("duration")
	bo.output, _ = flags.GetString("output")
	bo.wait, _ = flags.GetString("wait")
	bo.timeout, _ = flags.GetDuration("timeout")
	bo.dims = []string{"-"} // validate wants one; --vendor-sim names its own
	if err := bo.validate(); err != nil {
		return err
	}
	if s := cfg.schedule; len(s) > 0 && s[0].At >= bo.duration {
		return clikit.Usagef("--outage %q: starts after the run's %s", o.outage, bo.duration)
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
		if flags.Changed("processes") && bo.processes != 1 {
			return clikit.Usagef("--processes %d: memory:// lives in one process: run bench on it with --processes 1 (the default there), or use a shared store", bo.processes)
		}
		bo.processes = 1
	}
	c, err := g.Client(op.Store, log, waitRun(bo.duration))
	if err != nil {
		return err
	}
	cfg.run.Processes, cfg.run.Workers, cfg.run.Duration = bo.processes, bo.workers, bo.duration
	env := vbEnv{g: g, client: c, inProcess: op.Kind == "memory", store: op.Redacted, errw: errw, table: bo.output == "table"}
	var reps []*vbReport
	for _, rules := range cfg.rules {
		cfg.sim.Rules = rules
		for _, mc := range cfg.runs() {
			mode := mc.mode
			if env.table {
				fmt.Fprintf(errw, "sluice-lab bench: %s mode: %d process(es) × %d workers for %s against a simulated %s (%s; rules %s)\n",
					mc, bo.processes, bo.workers, bo.duration, cfg.run.Vendor, describeLoad(cfg.run.Load, bo.processes), rules)
			}
			cfg.run.Client = mc.client
			rep, err := env.runMode(ctx, cfg, mode)
			if err != nil {
				return fmt.Errorf("bench %s mode (rules %s): %w", mc, rules, err)
			}
			reps = append(reps, rep)
			if bo.output == "json" {
				if err := writeJSONLine(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			}
		}
	}
	if bo.output == "table" {
		return writeVendorBench(cmd.OutOrStdout(), reps)
	}
	return nil
}

// writeJSONLine prints v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// vbEnv is what every mode of one benchmark shares.
type vbEnv struct {
	g         *globals
	client    *sluice.Client
	inProcess bool
	store     string
	errw      io.Writer
	table     bool
}

// runMode runs one mode against a fresh simulator: it starts the
// processes, waits until each is ready, then starts the simulator, refills
// Sluice's buckets and lets every process go at once. The simulator's
// accounting is read when the run's duration has passed from that start.
func (e vbEnv) runMode(ctx context.Context, cfg vendorBenchConfig, mode string) (*vbReport, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the simulator: %w", err)
	}
	run := cfg.run
	run.Mode, run.URL = mode, "http://"+ln.Addr().String()
	var procs vbProcs
	if e.inProcess {
		procs, err = e.startInProcess(run)
	} else {
		procs, err = e.startChildren(ctx, run)
	}
	if err != nil {
		ln.Close()
		return nil, err
	}
	defer procs.stop()
	if mode == modeSluice {
		if err := e.resetBuckets(ctx, run); err != nil {
			ln.Close()
			return nil, err
		}
	}
	sim, err := vendorsim.New(cfg.sim)
	if err != nil {
		ln.Close()
		return nil, err
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	start := time.Now()
	if err := procs.start(start); err != nil {
		return nil, err
	}
	var st vendorsim.Stats
	select {
	case <-time.After(time.Until(start.Add(run.Duration))):
		st = sim.Stats()
	case <-ctx.Done():
		return nil, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	part, err := procs.wait()
	if err != nil {
		return nil, err
	}
	return newVBReport(run, cfg, e.store, st, part), nil
}

// resetBuckets puts the profile's buckets, full and without a cooldown.
func (e vbEnv) resetBuckets(ctx context.Context, run vbRun) error {
	prof, err := run.profile()
	if err != nil {
		return err
	}
	for _, b := range prof.Buckets() {
		if err := e.client.PutBucket(ctx, b, sluice.ResetTokens()); err != nil {
			return fmt.Errorf("putting %s: %w", b.Name, err)
		}
	}
	return nil
}

// vbProcs are a run's processes, ready to start.
type vbProcs interface {
	start(at time.Time) error
	wait() (*vbPart, error)
	stop()
}

// inProcess runs one process's workers as goroutines of this one.
type inProcess struct {
	p    *vbProcess
	ctx  context.Context
	done chan struct{}
	part *vbPart
	err  error
}

func (e vbEnv) startInProcess(run vbRun) (vbProcs, error) {
	p, err := newVBProcess(run, e.client)
	if err != nil {
		return nil, err
	}
	return &inProcess{p: p, ctx: context.Background(), done: make(chan struct{})}, nil
}

func (ip *inProcess) start(at time.Time) error {
	go func() {
		defer close(ip.done)
		ip.part, ip.err = ip.p.runWorkers(ip.ctx, at)
	}()
	return nil
}

func (ip *inProcess) wait() (*vbPart, error) { <-ip.done; return ip.part, ip.err }
func (ip *inProcess) stop()                  {}

// children are the child processes of a run.
type children struct {
	dir   string
	cmds  []*exec.Cmd
	stdin []io.WriteCloser
	errs  []*lockedBuffer
	ready chan error
	wg    sync.WaitGroup
}

// childReady is the line a child prints once it is ready to go.
const childReady = "ready"

// startChildren starts run.Processes bench-vendor-child processes and
// waits until each has printed that it is ready.
func (e vbEnv) startChildren(ctx context.Context, run vbRun) (vbProcs, error) {
	exe := e.g.Env.Executable
	if exe == nil {
		exe = os.Executable
	}
	path, err := exe()
	if err != nil {
		return nil, fmt.Errorf("cannot find the sluice binary to run children: %w", err)
	}
	dir, err := os.MkdirTemp("", "sluice-bench-vendor-*")
	if err != nil {
		return nil, err
	}
	ch := &children{dir: dir, ready: make(chan error, run.Processes)}
	for i := range run.Processes {
		r := run
		r.Process = i
		if err := ch.spawn(ctx, e.g, path, r); err != nil {
			ch.stop()
			return nil, err
		}
	}
	timeout := time.After(time.Minute)
	for range run.Processes {
		select {
		case err := <-ch.ready:
			if err != nil {
				ch.stop()
				return nil, err
			}
		case <-timeout:
			ch.stop()
			return nil, errors.New("the child processes were not ready within a minute")
		case <-ctx.Done():
			ch.stop()
			return nil, ctx.Err()
		}
	}
	return ch, nil
}

func (ch *children) spawn(ctx context.Context, g *globals, path string, r vbRun) error {
	cj, err := json.Marshal(r)
	if err != nil {
		return err
	}
	out := filepath.Join(ch.dir, "part-"+strconv.Itoa(r.Process)+".json")
	args := []string{"bench-vendor-child", "--store", g.Store, "--config", string(cj), "--out", out}
	if g.PasswordFile != "" {
		args = append(args, "--password-file", g.PasswordFile)
	}
	c := exec.CommandContext(ctx, path, args...)
	stdout, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	stdin, err := c.StdinPipe()
	if err != nil {
		return err
	}
	stderr := &lockedBuffer{}
	c.Stderr = stderr
	if err := c.Start(); err != nil {
		return fmt.Errorf("start child: %w", err)
	}
	ch.cmds, ch.stdin, ch.errs = append(ch.cmds, c), append(ch.stdin, stdin), append(ch.errs, stderr)
	ch.wg.Go(func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() && sc.Text() == childReady {
			ch.ready <- nil
		} else {
			_ = c.Wait()
			ch.ready <- fmt.Errorf("child %d did not start: %s", r.Process, stderr.String())
			return
		}
		for sc.Scan() { // drain
		}
	})
	return nil
}

// start tells every child to go.
func (ch *children) start(time.Time) error {
	for i, w := range ch.stdin {
		if _, err := io.WriteString(w, "go\n"); err != nil {
			return fmt.Errorf("child %d: %w", i, err)
		}
	}
	return nil
}

// wait waits for every child and merges their parts.
func (ch *children) wait() (*vbPart, error) {
	ch.wg.Wait()
	total := &vbPart{}
	var errs []error
	for i, c := range ch.cmds {
		if err := c.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("child %d: %w: %s", i, err, ch.errs[i].String()))
			continue
		}
		b, err := os.ReadFile(filepath.Join(ch.dir, "part-"+strconv.Itoa(i)+".json"))
		if err != nil {
			errs = append(errs, fmt.Errorf("child %d wrote no result: %w", i, err))
			continue
		}
		var p vbPart
		if err := json.Unmarshal(b, &p); err != nil {
			errs = append(errs, fmt.Errorf("child %d: %w", i, err))
			continue
		}
		total.merge(&p)
	}
	return total, errors.Join(errs...)
}

// stop kills children still running and removes their files.
func (ch *children) stop() {
	for _, c := range ch.cmds {
		if c.ProcessState == nil && c.Process != nil {
			_ = c.Process.Kill()
		}
	}
	for _, w := range ch.stdin {
		_ = w.Close()
	}
	ch.wg.Wait()
	os.RemoveAll(ch.dir)
}

// newBenchVendorChildCmd is the hidden command 'bench --vendor-sim' re-runs
// as each child process: it prepares the process of --config, prints
// "ready", waits for a line on stdin, runs its workers and writes its part
// to --out.
func newBenchVendorChildCmd(g *globals) *cobra.Command {
	var cfgJSON, out string
	cmd := &cobra.Command{
		Use:    "bench-vendor-child",
		Short:  "One process of sluice-lab bench --vendor-sim (internal)",
		Hidden: true,
		Args:   clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var run vbRun
			if err := json.Unmarshal([]byte(cfgJSON), &run); err != nil {
				return clikit.Usagef("--config: %v", err)
			}
			return runVendorChild(cmd, g, run, out)
		},
	}
	cmd.Flags().StringVar(&cfgJSON, "config", "", "the run, as JSON")
	cmd.Flags().StringVar(&out, "out", "", "file to write the result to")
	return cmd
}

func runVendorChild(cmd *cobra.Command, g *globals, run vbRun, out string) error {
	ctx := cmd.Context()
	var c *sluice.Client
	if run.Mode == modeSluice {
		log, err := g.Logger(cmd.ErrOrStderr())
		if err != nil {
			return &clikit.UsageError{Err: err}
		}
		op, err := g.Open(ctx)
		if err != nil {
			return err
		}
		defer op.Close()
		if c, err = g.Client(op.Store, log, waitRun(run.Duration)); err != nil {
			return err
		}
	}
	p, err := newVBProcess(run, c)
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), childReady)
	if _, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n'); err != nil {
		return fmt.Errorf("bench-vendor-child: waiting for the start: %w", err)
	}
	part, err := p.runWorkers(ctx, time.Now())
	if err != nil {
		return err
	}
	b, err := json.Marshal(part)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, b, 0o600); err != nil {
		return fmt.Errorf("bench-vendor-child: %w", err)
	}
	return nil
}

// waitRun lets a wait without a deadline (the transport's calls: the
// run's end cancels them) last the run, a run of duration d: the run's
// end, not a bound on the wait, ends a call's wait.
func waitRun(d time.Duration) func(*sluice.Config) {
	return func(cfg *sluice.Config) { cfg.DefaultSlotTimeout = d + time.Minute }
}
