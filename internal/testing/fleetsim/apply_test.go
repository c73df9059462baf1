package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/testing/fleetcheck"
	"github.com/ontopix/sluice/limits"
)

// TestConcurrentCreate has four replicas start at the same moment and
// apply a limits file that declares a new dimension while the rest of the
// fleet already spends on it: whichever replica creates the bucket, it is
// created once, full, and never filled again by the others.
func TestConcurrentCreate(t *testing.T) {
	for _, kind := range doorStores {
		t.Run(kind, func(t *testing.T) {
			f := newFleet(t, kind)
			for range 8 {
				f.join(Clock{})
			}
			for round := range 5 {
				dim := fmt.Sprintf("v%d#tpm", round)
				file, err := limits.Parse("limits.yaml", []byte(fmt.Sprintf("dimensions:\n  %s:\n    type: tokens\n    capacity: 100\n    per: minute\n", dim)))
				if err != nil {
					t.Fatal(err)
				}
				f.rec.Limit(dim, fleetcheck.Limit{Capacity: 100, Amount: 100, PeriodMs: time.Minute.Milliseconds()})
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				for _, m := range f.members[4:] { // the spenders
					wg.Add(1)
					go func() {
						defer wg.Done()
						for ctx.Err() == nil {
							if _, err := m.Acquire(ctx, dim, 10); err != nil && !errors.Is(err, sluice.ErrUnknownDimension) && ctx.Err() == nil {
								t.Error(err)
								return
							}
						}
					}()
				}
				start := make(chan struct{})
				var replicas sync.WaitGroup
				for _, m := range f.members[:4] {
					replicas.Add(1)
					go func() {
						defer replicas.Done()
						<-start
						if _, err := limits.Apply(context.Background(), m.Client, file); err != nil {
							t.Error(err)
						}
					}()
				}
				close(start)
				replicas.Wait()
				time.Sleep(200 * time.Millisecond)
				cancel()
				wg.Wait()
				f.verify(dim, 0)
			}
		})
	}
}
