package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/cmd/jsonout"
	"github.com/ontopix/sluice/internal/cmd/recorder"
	"github.com/ontopix/sluice/internal/cmd/verify"
	"github.com/ontopix/sluice/store"
)

// The demo's dimensions.
const (
	dimRPM  = "openai#rpm"
	dimTPM  = "openai#tpm"
	dimConc = "elevenlabs#concurrent"
)

// demoOptions are the demo's flags.
type demoOptions struct {
	workers    int
	duration   time.Duration
	rpm, tpm   int64
	concurrent int64
	output     string
	progress   string
}

func (o *demoOptions) validate() error {
	switch {
	case o.workers < 2 || o.workers > 10_000:
		return clikit.Usagef("--workers %d: must be between 2 and 10000", o.workers)
	case o.duration < 100*time.Millisecond || o.duration > 24*time.Hour:
		return clikit.Usagef("--duration %s: must be between 100ms and 24h", o.duration)
	case o.rpm < 1 || o.rpm > 1_000_000_000:
		return clikit.Usagef("--rpm %d: must be between 1 and 1e9", o.rpm)
	case o.tpm < 1_000 || o.tpm > 1_000_000_000:
		return clikit.Usagef("--tpm %d: must be between 1000 and 1e9 (a call estimates up to 160 tokens)", o.tpm)
	case o.concurrent < 1 || o.concurrent > 1_000_000:
		return clikit.Usagef("--concurrent %d: must be between 1 and 1e6", o.concurrent)
	}
	if err := clikit.OutputFlag(o.output); err != nil {
		return err
	}
	switch o.progress {
	case "auto", "tty", "plain", "none":
		return nil
	}
	return clikit.Usagef("--progress %q: must be auto, tty, plain or none", o.progress)
}

func (o *demoOptions) buckets() []store.Bucket {
	return []store.Bucket{
		{Name: dimRPM, Config: sluice.PerMinute(sluice.Requests, o.rpm)},
		{Name: dimTPM, Config: sluice.PerMinute(sluice.Tokens, o.tpm)},
		{Name: dimConc, Config: sluice.ConcurrentLimit(o.concurrent)},
	}
}

// demoRun is the outcome of one demo run: the verifier's report plus what
// the workers saw, to cross-check it.
type demoRun struct {
	Workers       int                        `json:"workers"`
	ChatWorkers   int                        `json:"chat_workers"`
	SpeechWorkers int                        `json:"speech_workers"`
	Elapsed       jsonout.Duration           `json:"elapsed"`
	Events        int                        `json:"events"`
	Counts        map[string]recorder.Counts `json:"counts"`
	ChatCalls     int64                      `json:"chat_calls"`
	SpeechCalls   int64                      `json:"speech_calls"`
	PeakSpeech    int64                      `json:"peak_speech_in_flight"`
	Timeouts      int64                      `json:"slot_timeouts"`
	Above         int64                      `json:"settled_above_estimate"`
	Below         int64                      `json:"settled_below_estimate"`
	Report        *verify.Report             `json:"verdict"`
	OK            bool                       `json:"ok"`
}

// workerStats are the counters the workers keep themselves.
type workerStats struct {
	chat, speech, inFlight, peak, timeouts, above, below atomic.Int64
}

// tick is one progress sample.
type tick struct {
	elapsed time.Duration
	counts  map[string]recorder.Counts
}

// runDemo runs the simulation on st and verifies the grants it recorded.
// progress, if not nil, is called about every 500 ms from one goroutine.
func runDemo(ctx context.Context, o demoOptions, st store.Store, progress func(tick)) (*demoRun, error) {
	rec := recorder.New(st)
	cfg := sluice.DefaultConfig()
	cfg.PollInterval = 25 * time.Millisecond // concurrent RETRY_IN hint: slots free up within ~175 ms
	cfg.Caller = "sluice-demo"
	c, err := sluice.New(rec, sluice.WithConfig(cfg))
	if err != nil {
		return nil, err
	}
	buckets := o.buckets()
	for _, b := range buckets {
		if err := c.PutBucket(ctx, b, sluice.ResetTokens()); err != nil {
			return nil, err
		}
	}
	speech := max(1, o.workers*2/5)
	run := &demoRun{Workers: o.workers, ChatWorkers: o.workers - speech, SpeechWorkers: speech}
	var ws workerStats
	var failed atomic.Pointer[error]
	fail := func(err error) { failed.CompareAndSwap(nil, &err) }

	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	seed := rand.Uint64()
	var wg sync.WaitGroup
	for i := range o.workers {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		if i < run.ChatWorkers {
			wg.Go(func() { chatWorker(wctx, c, rng, &ws, fail) })
		} else {
			wg.Go(func() { speechWorker(wctx, c, rng, &ws, fail) })
		}
	}
	done := make(chan struct{})
	var pg sync.WaitGroup
	if progress != nil {
		pg.Go(func() {
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					progress(tick{elapsed: time.Since(start), counts: rec.Snapshot()})
				}
			}
		})
	}
	wg.Wait()
	close(done)
	pg.Wait()
	end := time.Now()
	if p := failed.Load(); p != nil {
		return nil, *p
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("demo interrupted: %w", err)
	}

	events := rec.Events()
	rep, err := verify.Check(verify.Input{Buckets: buckets, Events: events, Start: start, End: end})
	if err != nil {
		return nil, err
	}
	run.Elapsed, run.Events, run.Counts, run.Report = jsonout.Duration(end.Sub(start)), len(events), rec.Snapshot(), rep
	run.ChatCalls, run.SpeechCalls, run.PeakSpeech = ws.chat.Load(), ws.speech.Load(), ws.peak.Load()
	run.Timeouts, run.Above, run.Below = ws.timeouts.Load(), ws.above.Load(), ws.below.Load()
	run.OK = rep.OK()
	// The store's log and the workers' own counts must agree: a lease that
	// never reached the store (a degraded grant) would show up here.
	for _, x := range []struct {
		dim  string
		want int64
	}{{dimRPM, run.ChatCalls}, {dimTPM, run.ChatCalls}, {dimConc, run.SpeechCalls}} {
		if got := run.Counts[x.dim].Granted; got != x.want {
			return run, fmt.Errorf("%s: the store recorded %d grants but the workers made %d calls", x.dim, got, x.want)
		}
	}
	if run.PeakSpeech > o.concurrent {
		run.OK = false
	}
	return run, nil
}

// stopped reports whether err only says the run is over.
func stopped(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
}

// chatWorker calls a simulated OpenAI chat API: it reserves 1 request and an
// estimate of 60–160 tokens, "calls" for 20–100 ms, and settles the tokens
// to an actual usage of 70–130 % of the estimate (above it: debt).
func chatWorker(ctx context.Context, c *sluice.Client, rng *rand.Rand, ws *workerStats, fail func(error)) {
	for ctx.Err() == nil {
		est := 60 + rng.Int64N(101)
		actual := max(1, est*(70+rng.Int64N(61))/100)
		latency := time.Duration(20+rng.IntN(81)) * time.Millisecond
		reqs := []sluice.Request{{Dimension: dimRPM, Cost: 1}, {Dimension: dimTPM, Cost: est}}
		// The demo polls (WithPolling): its checker (package verify) counts
		// a grant at the instant the store made it valid, which for a
		// reservation moved by later settlements is not when its caller
		// proceeds; a polled grant is valid when it is made.
		err := c.WithSlotMany(ctx, reqs, func(_ context.Context, l *sluice.Lease) error {
			ws.chat.Add(1)
			time.Sleep(latency) // the vendor call runs to completion even at the end of the run
			switch {
			case actual > est:
				ws.above.Add(1)
			case actual < est:
				ws.below.Add(1)
			}
			_, err := l.Settle(context.WithoutCancel(ctx), dimTPM, actual)
			return err
		}, sluice.WithPolling())
		if err != nil {
			ws.end(ctx, err, "chat worker", fail)
			return
		}
	}
}

// end takes in the error that stops a worker: its wait ended with the run
// (its slot comes after the end: counted), the run ended, or the call
// failed (reported through fail).
func (ws *workerStats) end(ctx context.Context, err error, who string, fail func(error)) {
	switch {
	case errors.Is(err, sluice.ErrSlotTimeout):
		ws.timeouts.Add(1)
	case stopped(ctx, err):
	default:
		fail(fmt.Errorf("%s: %w", who, err))
	}
}

// speechWorker calls a simulated ElevenLabs TTS API, holding one of its
// concurrent slots for 50–300 ms.
func speechWorker(ctx context.Context, c *sluice.Client, rng *rand.Rand, ws *workerStats, fail func(error)) {
	for ctx.Err() == nil {
		hold := time.Duration(50+rng.IntN(251)) * time.Millisecond
		err := c.WithSlot(ctx, dimConc, func(context.Context, *sluice.Lease) error {
			ws.speech.Add(1)
			n := ws.inFlight.Add(1)
			for p := ws.peak.Load(); n > p && !ws.peak.CompareAndSwap(p, n); p = ws.peak.Load() {
			}
			time.Sleep(hold)
			ws.inFlight.Add(-1)
			return nil
		}, sluice.WithPolling())
		if err != nil {
			ws.end(ctx, err, "speech worker", fail)
			return
		}
	}
}
