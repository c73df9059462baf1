package slotload

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice"
)

// Recovery is a run across a store fault.
type Recovery struct {
	// Full is how long after the fault returned (the store back) every
	// slot was held at once again; 0 if that did not happen within the
	// run.
	Full time.Duration
	// After counts the slots granted in the 2.5 s after the fault
	// returned.
	After int
}

// RunFault runs cfg's workers (WithSlot, waiting in line) for a second,
// calls fault (which breaks the store and brings it back), and measures
// how soon the slots are all in use again, for up to cfg.Window after the
// fault.
func RunFault(ctx context.Context, cfg Config, fault func() error) (Recovery, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		held, grants atomic.Int64
		full         atomic.Int64 // UnixNano when every slot was held, after back
		back         atomic.Int64 // UnixNano when the fault returned
		wg           sync.WaitGroup
	)
	for i := range cfg.Workers {
		c := cfg.Clients[i%len(cfg.Clients)]
		wg.Go(func() {
			for wctx.Err() == nil {
				sctx, scancel := context.WithTimeout(wctx, time.Minute)
				err := c.WithSlot(sctx, cfg.Dimension, func(fctx context.Context, _ *sluice.Lease) error {
					n := held.Add(1)
					defer held.Add(-1)
					grants.Add(1)
					if b := back.Load(); b != 0 && n == int64(cfg.Slots) {
						full.CompareAndSwap(0, time.Now().UnixNano())
					}
					t := time.NewTimer(cfg.Hold)
					defer t.Stop()
					select {
					case <-t.C:
					case <-fctx.Done():
					}
					return nil
				})
				scancel()
				if err != nil && wctx.Err() == nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(time.Second)
	if err := fault(); err != nil {
		return Recovery{}, err
	}
	b := time.Now()
	start := grants.Load()
	back.Store(b.UnixNano())
	time.Sleep(2500 * time.Millisecond)
	r := Recovery{After: int(grants.Load() - start)}
	for deadline := b.Add(cfg.Window); full.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if f := full.Load(); f != 0 {
		r.Full = time.Duration(f - b.UnixNano())
	}
	return r, nil
}
