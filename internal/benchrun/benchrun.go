// Package benchrun is the load generator behind `sluice bench`: workers
// that acquire the same dimensions all-or-nothing as fast as the limits
// allow, each keeping a log of the grants and releases the store applied,
// stamped with the store's own decision time; and the merge of those logs,
// from every worker of every process, into one verdict by package verify.
//
// A grant's time is exact: the store reports the lease's expiry, its
// decision time plus the TTL we asked for. A release's time is exact when
// the store decides at the time it is given (memory, Redis with
// caller_clock); on a store with its own clock (Redis TIME) it is the
// earliest server time the release can have happened at, from the worker's
// clock and the offset its grants bound, so that a slot is never counted
// as held after it may have been freed.
package benchrun

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/verify"
	"github.com/ontopix/sluice/store"
)

// Config is one process's share of a bench run.
type Config struct {
	// Items are acquired together, all-or-nothing, by every call.
	Items []store.Item `json:"items"`
	// Workers is the number of goroutines.
	Workers int `json:"workers"`
	// Duration is how long they run.
	Duration time.Duration `json:"duration"`
	// Hold is how long a lease with a concurrent item is held before it is
	// released.
	Hold time.Duration `json:"hold"`
	// TTL is the lease lifetime.
	TTL time.Duration `json:"ttl"`
	// StoreClock says the store decides on its own clock (Redis TIME), not
	// on the request's Now.
	StoreClock bool `json:"store_clock"`
	// Concurrent says some item is a concurrent dimension: leases are
	// recorded and released after Hold.
	Concurrent bool `json:"concurrent"`
}

// Event is a compact verify.Event: Unix ms, item index, kind, millitokens.
type Event struct {
	T int64       `json:"t"`
	I int         `json:"i"`
	K verify.Kind `json:"k"`
	M int64       `json:"m"`
}

// Part is what one process's workers did.
type Part struct {
	Granted  int64  `json:"granted"`
	Denied   int64  `json:"denied"`
	Errors   int64  `json:"errors"`
	FirstErr string `json:"first_error,omitempty"`
	// LatencyUS lists every acquire's latency in microseconds.
	LatencyUS []int64   `json:"latency_us"`
	Events    []Event   `json:"events"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
}

// Counters are live totals for progress.
type Counters struct {
	Granted, Denied, Errors atomic.Int64
}

// Run runs cfg's workers through c until cfg.Duration passes or ctx is
// done, and returns their merged log.
//
// The end of the run stops the workers from starting new calls; it does
// not cut the calls in flight, which finish (within the store's own
// timeout) and are counted as they come out: a store error then is a store
// error, and a grant is logged. Only ctx, the caller's, cuts calls, and
// what it cuts is not counted.
func Run(ctx context.Context, c *sluice.Client, cfg Config, live *Counters) (*Part, error) {
	if cfg.Workers < 1 || len(cfg.Items) == 0 {
		return nil, errors.New("benchrun: need at least one worker and one item")
	}
	for _, it := range cfg.Items {
		if it.Cost < 1 {
			return nil, fmt.Errorf("benchrun: item %q: cost %d: must be at least 1 (resolve the bucket's cost per call first)", it.Dimension, it.Cost)
		}
	}
	if live == nil {
		live = &Counters{}
	}
	end, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	parts := make([]*Part, cfg.Workers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cfg.Workers {
		parts[i] = &Part{}
		wg.Go(func() { worker(ctx, end, c, cfg, parts[i], live) })
	}
	wg.Wait()
	out := &Part{Start: start, End: time.Now()}
	for _, p := range parts {
		out.Granted += p.Granted
		out.Denied += p.Denied
		out.Errors += p.Errors
		if out.FirstErr == "" {
			out.FirstErr = p.FirstErr
		}
		out.LatencyUS = append(out.LatencyUS, p.LatencyUS...)
		out.Events = append(out.Events, p.Events...)
	}
	return out, nil
}

// worker acquires in a loop, waiting out RETRY_IN answers, until end is
// done. Its store calls run under ctx, which the run's end does not cut.
// Contention is retried by the Client; what it gives up on is a RETRY_IN.
func worker(ctx, end context.Context, c *sluice.Client, cfg Config, p *Part, live *Counters) {
	reqs := make([]sluice.Request, len(cfg.Items))
	for i, it := range cfg.Items {
		reqs[i] = sluice.Request{Dimension: it.Dimension, Cost: it.Cost}
	}
	opts := []sluice.AcquireOption{sluice.WithCaller("sluice-bench"), sluice.WithTTL(cfg.TTL)}
	if cfg.Concurrent {
		opts = append(opts, sluice.WithRecord())
	}
	var offLo int64 // lower bound of store clock − worker clock, in ms
	haveOff := false
	for end.Err() == nil {
		c0 := time.Now()
		res, err := c.AcquireMany(ctx, reqs, opts...)
		c1 := time.Now()
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			p.fail(live, err.Error())
			pause(end, 10*time.Millisecond)
			continue
		}
		p.LatencyUS = append(p.LatencyUS, c1.Sub(c0).Microseconds())
		if !res.Granted() {
			p.Denied++
			live.Denied.Add(1)
			pause(end, max(res.RetryIn, time.Millisecond))
			continue
		}
		p.Granted++
		live.Granted.Add(1)
		tg := res.Lease.ExpiresAt().Add(-cfg.TTL).UnixMilli()
		if o := tg - c1.UnixMilli(); !haveOff || o > offLo {
			offLo, haveOff = o, true
		}
		for i, d := range res.Dimensions {
			p.Events = append(p.Events, Event{T: tg, I: i, K: verify.Grant, M: d.Cost * bucket.Milli})
		}
		if cfg.Concurrent {
			release(ctx, c, cfg, res.Lease.ID(), offLo, p, live)
		}
	}
}

// release holds a granted lease for cfg.Hold, releases it and logs the
// slots it gave back.
func release(ctx context.Context, c *sluice.Client, cfg Config, id string, offLo int64, p *Part, live *Counters) {
	ctx = context.WithoutCancel(ctx)
	pause(ctx, cfg.Hold)
	rn := time.Now()
	rr, err := c.ReleaseLease(ctx, id)
	if err != nil {
		p.fail(live, fmt.Sprintf("release: %v", err))
		return
	}
	tr := rn.UnixMilli()
	if cfg.StoreClock {
		tr += offLo
	}
	for _, r := range rr.Restored {
		for i, it := range cfg.Items {
			if it.Dimension == r.Dimension {
				p.Events = append(p.Events, Event{T: tr, I: i, K: verify.Release, M: r.Cost * bucket.Milli})
			}
		}
	}
}

// fail counts a store error, keeping the first.
func (p *Part) fail(live *Counters, msg string) {
	p.Errors++
	live.Errors.Add(1)
	if p.FirstErr == "" {
		p.FirstErr = msg
	}
}

func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
