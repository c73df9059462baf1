// Package slotload drives a concurrent dimension with more workers than
// slots through a real sluice.Client and measures how well the slots were
// used: the scenario behind the waiting-in-line utilisation figures in
// docs/reliability.md, shared by the root package's tests and the stores'.
package slotload

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ontopix/sluice"
)

// Config is one run.
type Config struct {
	// Clients are the processes, one Client each; workers are spread over
	// them round-robin. At least one.
	Clients []*sluice.Client
	// Dimension is the concurrent dimension, of Slots slots.
	Dimension string
	Slots     int
	// Workers loop Wait, hold, Release until the window ends.
	Workers int
	// Hold is how long a worker keeps its slot.
	Hold time.Duration
	// Window is how long the run lasts.
	Window time.Duration
	// Polling makes the workers wait with sluice.WithPolling.
	Polling bool
}

// Result is a run's measurement.
type Result struct {
	// Utilisation is the slot-time held during the window over the
	// slot-time available (Slots × Window), from 0 to 1. Every run keeps
	// more workers than slots waiting, so a slot that is not held is one a
	// caller waited for in vain.
	Utilisation float64
	// Grants counts the slots granted during the window.
	Grants int
	// Errors counts the waits that failed otherwise than by the window's
	// end.
	Errors int
	// FirstErr is the first of those errors.
	FirstErr error
}

// Run runs cfg and measures it. The workers stop at the end of the window
// (their context is cancelled); Run returns once all have.
func Run(ctx context.Context, cfg Config) Result {
	start := time.Now()
	end := start.Add(cfg.Window)
	wctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var (
		mu   sync.Mutex
		held time.Duration
		res  Result
		wg   sync.WaitGroup
	)
	var opts []sluice.AcquireOption
	if cfg.Polling {
		opts = append(opts, sluice.WithPolling())
	}
	for i := range cfg.Workers {
		c := cfg.Clients[i%len(cfg.Clients)]
		wg.Go(func() {
			for wctx.Err() == nil {
				l, err := c.Wait(wctx, []sluice.Request{{Dimension: cfg.Dimension, Cost: 1}}, opts...)
				if err != nil {
					// The wait times out only on the window's end (the
					// context's deadline).
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, sluice.ErrSlotTimeout) {
						mu.Lock()
						res.Errors++
						if res.FirstErr == nil {
							res.FirstErr = err
						}
						mu.Unlock()
						if wctx.Err() == nil {
							time.Sleep(10 * time.Millisecond)
						}
					}
					continue
				}
				got := time.Now()
				t := time.NewTimer(cfg.Hold)
				select {
				case <-t.C:
				case <-wctx.Done():
					t.Stop()
				}
				stop := time.Now()
				if stop.After(end) {
					stop = end
				}
				_ = l.Release(context.WithoutCancel(ctx))
				mu.Lock()
				res.Grants++
				if stop.After(got) {
					held += stop.Sub(got)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Utilisation = float64(held) / float64(time.Duration(cfg.Slots)*cfg.Window)
	return res
}
