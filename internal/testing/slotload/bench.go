package slotload

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// counted counts a store's decision calls.
type counted struct {
	contract.Forward
	n atomic.Int64
}

func (s *counted) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	s.n.Add(1)
	return s.Store.Acquire(ctx, req, res)
}

func (s *counted) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	s.n.Add(1)
	return s.Store.Release(ctx, req)
}

func (s *counted) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	s.n.Add(1)
	return s.Forward.Dequeue(ctx, req)
}

// notifying is counted for a store that sends notices of freed units
// (store.FreedWatcher): its clients watch through it, as they would the
// store itself.
type notifying struct {
	*counted
	w store.FreedWatcher
}

func (s notifying) WatchFreed(ctx context.Context, freed func(dimension string)) error {
	return s.w.WatchFreed(ctx, freed)
}

// Bench runs the utilisation scenario on the stores open returns (same
// nil: a fresh store; else another handle on same's backend, as another
// process would have): 8 slots,
// 16 workers, holds of 20 ms and 1 s, in one process (one Client) and in
// two (two Clients, each on its own handle), waiting in line and polling.
// Each sub-benchmark runs the scenario once per iteration and reports
// %util (slot-time held over slot-time available), calls/s (Acquire,
// Release and Dequeue calls a second) and %handed (the grants that a
// release in the same process handed over). Run it with -benchtime=1x.
func Bench(b *testing.B, open func(tb testing.TB, same store.Store) store.Store) {
	for _, hold := range []time.Duration{20 * time.Millisecond, time.Second} {
		for _, procs := range []int{1, 2} {
			for _, polling := range []bool{false, true} {
				name := hold.String() + "/procs=" + string(rune('0'+procs)) + "/reserve"
				if polling {
					name = hold.String() + "/procs=" + string(rune('0'+procs)) + "/poll"
				}
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						benchOnce(b, open, hold, procs, polling)
					}
				})
			}
		}
	}
}

func benchOnce(b *testing.B, open func(tb testing.TB, same store.Store) store.Store, hold time.Duration, procs int, polling bool) {
	ctx := context.Background()
	var clients []*sluice.Client
	var stores []*counted
	var first store.Store
	var grants, handed atomic.Int64
	obs := &sluice.Observer{Acquired: func(_ context.Context, e sluice.AcquireEvent) {
		if e.Outcome == sluice.Granted && e.Err == nil {
			grants.Add(1)
			if e.HandedOver {
				handed.Add(1)
			}
		}
	}}
	for range procs {
		st := open(b, first)
		if first == nil {
			first = st
		}
		cs := &counted{Forward: contract.Forward{Store: st}}
		var cst store.Store = cs
		if w, ok := st.(store.FreedWatcher); ok {
			cst = notifying{cs, w}
		}
		c, err := sluice.New(cst, sluice.WithObserver(obs))
		if err != nil {
			b.Fatal(err)
		}
		clients, stores = append(clients, c), append(stores, cs)
	}
	dim := "load#concurrent"
	if err := clients[0].PutBucket(ctx, sluice.Bucket{Name: dim, Config: sluice.ConcurrentLimit(8)}); err != nil {
		b.Fatal(err)
	}
	window := 3 * time.Second
	if hold >= time.Second {
		window = 10 * time.Second
	}
	res := Run(ctx, Config{Clients: clients, Dimension: dim, Slots: 8, Workers: 16, Hold: hold, Window: window, Polling: polling})
	if res.Errors > 0 {
		b.Fatalf("%d waits failed; first: %v", res.Errors, res.FirstErr)
	}
	var calls int64
	for _, s := range stores {
		calls += s.n.Load()
	}
	b.ReportMetric(100*res.Utilisation, "%util")
	b.ReportMetric(float64(calls)/window.Seconds(), "calls/s")
	if n := grants.Load(); n > 0 {
		b.ReportMetric(100*float64(handed.Load())/float64(n), "%handed")
	}
}
