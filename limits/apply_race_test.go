package limits_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/limits"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// fixedClock never moves, so that no bucket refills during a test.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// slowList makes listing the buckets yield, as a round trip to a remote
// store does, so that appliers interleave between reading and writing.
type slowList struct{ store.Store }

func (s slowList) ListBuckets(ctx context.Context, req store.ListBucketsRequest) ([]store.BucketState, error) {
	bs, err := s.Store.ListBuckets(ctx, req)
	runtime.Gosched()
	return bs, err
}

const raceFile = `dimensions:
  fleet#rpm:
    type: requests
    capacity: 9
    per: 1m
  fleet#concurrent:
    type: concurrent
    capacity: 4
`

// TestApplyRaceNeverRefills starts a fleet: replicas apply the same file at
// once while others spend as soon as a bucket exists. The clock is fixed,
// so no bucket earns anything: the grants must not exceed the capacities,
// which an apply that refilled a bucket another replica created and spent
// from would break.
func TestApplyRaceNeverRefills(t *testing.T) {
	f := parse(t, raceFile)
	caps := map[string]int64{"fleet#rpm": 9, "fleet#concurrent": 4}
	const replicas, spenders, rounds = 8, 24, 20
	over := 0
	for round := range rounds {
		st := slowList{memstore.New()}
		c, err := sluice.New(st, sluice.WithClock(fixedClock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var granted sync.Map
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, replicas+spenders)
		for r := range replicas {
			wg.Go(func() {
				<-start
				if _, err := limits.Apply(ctx, c, f); err != nil {
					errs <- fmt.Errorf("replica %d: %w", r, err)
				}
			})
		}
		for g := range spenders {
			dim := []string{"fleet#rpm", "fleet#concurrent"}[g%2]
			n, _ := granted.LoadOrStore(dim, new(atomic.Int64))
			wg.Go(func() {
				<-start
				for i, done := 0, 0; done < 3 && i < 100_000; i++ {
					res, err := c.Acquire(ctx, dim)
					if errors.Is(err, sluice.ErrUnknownDimension) {
						runtime.Gosched() // not created yet
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("spender %d: %w", g, err)
						return
					}
					done++
					if res.Outcome == sluice.Granted {
						n.(*atomic.Int64).Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for dim, capacity := range caps {
			n, _ := granted.Load(dim)
			if got := n.(*atomic.Int64).Load(); got > capacity {
				over++
				t.Errorf("round %d: %s granted %d with a fixed clock, want at most its capacity %d (%d replicas applying, %d spenders)",
					round, dim, got, capacity, replicas, spenders)
			}
		}
	}
	if over > 0 {
		t.Errorf("%d of %d rounds x %d buckets over-admitted", over, rounds, len(caps))
	}
}
