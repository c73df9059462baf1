// Package benchrun is the load generator behind `sluice-lab bench`: workers
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
	"github.com/ontopix/sluice/internal/cmd/verify"
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
	// Classes, when set, replaces Items and Workers: each class's workers
	// acquire the same dimensions as Items, in the same order, at the
	// class's own costs.
	Classes []Class `json:"classes,omitempty"`
	// Wait is how workers wait: "poll" (the default, sluice.WithPolling)
	// or "reserve" (in line, the Client's default).
	Wait string `json:"wait,omitempty"`
	// Timeout bounds each wait; 0 means DefaultTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// DefaultTimeout is a worker's wait timeout when Config.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// EndGrace is how long after the end of a run the calls still in flight
// may finish before they are cut (and not counted).
const EndGrace = time.Second

// Class is one kind of request in a run.
type Class struct {
	// Name labels the class in the report, e.g. "5000x2".
	Name string `json:"name"`
	// Items are its dimensions and costs, in Config.Items' order.
	Items []store.Item `json:"items"`
	// Workers is the number of goroutines asking for Items.
	Workers int `json:"workers"`
}

// classes returns cfg's classes: Classes, or one class of Items.
func (cfg Config) classes() []Class {
	if len(cfg.Classes) > 0 {
		return cfg.Classes
	}
	return []Class{{Name: "all", Items: cfg.Items, Workers: cfg.Workers}}
}

// TotalWorkers returns the number of workers of cfg's classes.
func (cfg Config) TotalWorkers() int {
	n := 0
	for _, cl := range cfg.classes() {
		n += cl.Workers
	}
	return n
}

// polling reports whether cfg.Wait names polling.
func (cfg Config) polling() (bool, error) {
	switch cfg.Wait {
	case "", "poll":
		return true, nil
	case "reserve":
		return false, nil
	}
	return false, fmt.Errorf("benchrun: wait %q: must be poll or reserve", cfg.Wait)
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
	// Calls counts the store calls the workers made (acquire, reserve,
	// cancel, dequeue, release), when the client's store was wrapped with
	// Counters.Wrap.
	Calls int64 `json:"calls"`
	// Classes has one entry per class of the run.
	Classes []ClassPart `json:"classes"`
}

// ClassPart is what one class's workers did.
type ClassPart struct {
	Granted  int64 `json:"granted"`
	Timeouts int64 `json:"timeouts"`
	// Cut counts waits the run's end cut short: the worker was still
	// waiting (polling), or its slot would come after the end (reserving).
	Cut int64 `json:"cut"`
	// Milli is the cost granted on the first dimension, in millitokens.
	Milli int64 `json:"milli"`
	// Calls counts the class's store calls (see Part.Calls).
	Calls int64 `json:"calls"`
	// WaitUS lists every granted wait, from the call to the slot, in µs.
	WaitUS []int64 `json:"wait_us"`
	// LagUS lists, per grant, how long after its valid instant (the
	// store's decision time, for a grant without a reservation) the worker
	// got the slot, in µs.
	LagUS []int64 `json:"lag_us"`
	// PerWorker counts each worker's grants.
	PerWorker []int64 `json:"per_worker"`
}

// Run runs cfg's workers through c until cfg.Duration passes or ctx is
// done, and returns their merged log. Each worker waits for its class's
// items with c.Wait, with the strategy cfg.Wait names, under a context
// whose deadline is cfg.Timeout away, cut to the run's end.
//
// The end of the run stops the workers from starting new waits and ends
// the waits under way (a store call of a wait in flight then is cut, and
// not counted as an error); it does not cut the other calls in flight,
// which finish (within the store's own
// timeout) and are counted as they come out: a store error then is a store
// error, and a grant is logged. A wait that the run's end cut short is not
// a timeout. Only ctx, the caller's, cuts calls, or EndGrace after the
// end, and what is cut is not counted.
func Run(ctx context.Context, c *sluice.Client, cfg Config, live *Counters) (*Part, error) {
	classes := cfg.classes()
	if err := cfg.check(classes); err != nil {
		return nil, err
	}
	polling, err := cfg.polling()
	if err != nil {
		return nil, err
	}
	if live == nil {
		live = &Counters{}
	}
	calls0, denied0, lat0 := live.Calls.Load(), live.Denied.Load(), live.latencies()
	end, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	// A wait ends at the run's end (its context's deadline); the workers'
	// other calls are cut EndGrace after the end, and not counted.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	grace := time.AfterFunc(cfg.Duration+EndGrace, stop)
	defer grace.Stop()
	calls := make([]atomic.Int64, len(classes))
	var parts []*Part
	var wg sync.WaitGroup
	start := time.Now()
	for k, cl := range classes {
		wctx := context.WithValue(ctx, classKey{}, &calls[k])
		for range cl.Workers {
			p := &Part{Classes: []ClassPart{{PerWorker: []int64{0}}}}
			parts = append(parts, p)
			wg.Go(func() { worker(wctx, end, c, cfg, polling, cl, p, live) })
		}
	}
	wg.Wait()
	out := &Part{Start: start, End: time.Now(), Classes: make([]ClassPart, len(classes))}
	i := 0
	for k, cl := range classes {
		cp := &out.Classes[k]
		cp.Calls = calls[k].Load()
		for range cl.Workers {
			p := parts[i]
			i++
			out.Granted += p.Granted
			out.Errors += p.Errors
			if out.FirstErr == "" {
				out.FirstErr = p.FirstErr
			}
			out.Events = append(out.Events, p.Events...)
			w := p.Classes[0]
			cp.Granted += w.Granted
			cp.Timeouts += w.Timeouts
			cp.Cut += w.Cut
			cp.Milli += w.Milli
			cp.WaitUS = append(cp.WaitUS, w.WaitUS...)
			cp.LagUS = append(cp.LagUS, w.LagUS...)
			cp.PerWorker = append(cp.PerWorker, w.Granted)
		}
	}
	out.Calls = live.Calls.Load() - calls0
	out.Denied = live.Denied.Load() - denied0
	out.LatencyUS = live.latencies()[len(lat0):]
	return out, nil
}

// check validates cfg and its classes.
func (cfg Config) check(classes []Class) error {
	if len(cfg.Items) == 0 {
		return errors.New("benchrun: need at least one item")
	}
	for _, cl := range classes {
		if cl.Workers < 1 {
			return fmt.Errorf("benchrun: class %q: need at least one worker", cl.Name)
		}
		if len(cl.Items) != len(cfg.Items) {
			return fmt.Errorf("benchrun: class %q: %d items, want the run's %d", cl.Name, len(cl.Items), len(cfg.Items))
		}
		for i, it := range cl.Items {
			if it.Dimension != cfg.Items[i].Dimension {
				return fmt.Errorf("benchrun: class %q: item %d is %q, want %q", cl.Name, i, it.Dimension, cfg.Items[i].Dimension)
			}
			if it.Cost < 1 {
				return fmt.Errorf("benchrun: item %q: cost %d: must be at least 1 (resolve the bucket's cost per call first)", it.Dimension, it.Cost)
			}
		}
	}
	return nil
}

// worker waits for cl's items in a loop until end is done. Its waits run
// under ctx bounded by the run's end; its other store calls run under
// ctx, which the run's end does not cut. p holds one ClassPart, the
// worker's own.
func worker(ctx, end context.Context, c *sluice.Client, cfg Config, polling bool, cl Class, p *Part, live *Counters) {
	reqs := cl.Items
	opts := []sluice.AcquireOption{sluice.WithCaller("sluice-bench"), sluice.WithTTL(cfg.TTL)}
	if cfg.Concurrent {
		opts = append(opts, sluice.WithRecord())
	}
	if polling {
		opts = append(opts, sluice.WithPolling())
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline, _ := end.Deadline()
	cp := &p.Classes[0]
	var offLo int64 // lower bound of store clock − worker clock, in ms
	haveOff := false
	for end.Err() == nil {
		to, cut := timeout, false
		if left := time.Until(deadline).Truncate(time.Millisecond); left < to {
			to, cut = left, true
		}
		if to <= 0 {
			return
		}
		c0 := time.Now()
		wctx, wcancel := context.WithTimeout(ctx, to)
		l, err := c.Wait(wctx, reqs, opts...)
		wcancel()
		c1 := time.Now()
		// An error matching context.DeadlineExceeded is the wait's bound
		// (wctx's deadline: the Client reports its own OpTimeout as
		// ErrUnavailable), even when the store read the deadline and
		// reported it before the context's timer fired.
		timedOut := errors.Is(err, sluice.ErrSlotTimeout) || errors.Is(err, context.DeadlineExceeded)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case timedOut && cut:
			cp.Cut++
			return // the run ends before a slot would come
		case timedOut:
			cp.Timeouts++
			continue
		case err != nil:
			p.fail(live, err.Error())
			pause(end, 10*time.Millisecond)
			continue
		}
		p.Granted++
		live.Granted.Add(1)
		// The store's valid instant: its decision time, or a reservation's
		// valid instant (the lease's TTL counts from it).
		tg := l.ExpiresAt().Add(-cfg.TTL).UnixMilli()
		if o := tg - c1.UnixMilli(); !haveOff || o > offLo {
			offLo, haveOff = o, true
		}
		dims := l.Dimensions()
		cp.Granted++
		cp.Milli += dims[0].Cost * bucket.Milli
		cp.WaitUS = append(cp.WaitUS, c1.Sub(c0).Microseconds())
		cp.LagUS = append(cp.LagUS, c1.Sub(time.UnixMilli(tg)).Microseconds())
		for i, d := range dims {
			p.Events = append(p.Events, Event{T: tg, I: i, K: verify.Grant, M: d.Cost * bucket.Milli})
		}
		if cfg.Concurrent {
			release(ctx, c, cfg, l.ID(), offLo, p, live)
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
