package sluice_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// Settling above the estimate while other calls wait in line: a bucket of
// 5 000 tokens earning 5 000 a second, waiters that each wait for 250
// tokens, work 50 ms and settle 30 % or 100 % above the estimate. Every
// window of the run must see at most the capacity plus the window's refill,
// counting each grant at the instant Wait returned and each settlement's
// charge at the instant it was made.
const (
	sqCapacity = 5_000
	sqEstimate = 250
	sqRun      = 8 * time.Second
)

// usage is one use of the bucket: a grant or a settlement's charge.
type usage struct {
	at     time.Time
	seq    int64 // the order of the store call that decided it
	milli  int64
	grant  bool
	waited bool
}

// usageLog collects usages from many goroutines.
type usageLog struct {
	mu sync.Mutex
	us []usage
}

func (l *usageLog) add(u usage) {
	l.mu.Lock()
	l.us = append(l.us, u)
	l.mu.Unlock()
}

// maxExcess returns, over every window [a, b] that ends with a grant, the
// largest of admitted − (capacity + rate × (b − a)), in millitokens, with
// rate in millitokens per millisecond. A window counts the grants and the
// settlements decided in it up to the grant's own decision, in the store's
// order: a settlement made after a grant cannot have held it back, and
// the debt it brings by itself is usage that happened before anyone knew
// of it, not an admission.
func maxExcess(us []usage, capacityMilli, rate int64) int64 {
	us = slices.Clone(us)
	slices.SortStableFunc(us, func(a, b usage) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	excess := int64(-1 << 62)
	for j := range us {
		if !us[j].grant {
			continue
		}
		var sum int64
		for i := j; i >= 0; i-- {
			sum += us[i].milli
			w := us[j].at.Sub(us[i].at).Milliseconds()
			excess = max(excess, sum-capacityMilli-rate*w)
		}
	}
	return excess
}

// seqKey carries, in a Wait's context, where the store records the order
// of the last call that decided for it.
type seqKey struct{}

// orderingStore serializes reservations, peeks and settlements, numbering
// them in the order the store decided them, and counts reservations and
// peeks.
type orderingStore struct {
	contract.Forward
	mu              sync.Mutex
	seq             int64
	reserves, peeks int64
	log             *usageLog
}

func (s *orderingStore) next(ctx context.Context) int64 {
	s.seq++
	if p, ok := ctx.Value(seqKey{}).(*int64); ok {
		*p = s.seq
	}
	return s.seq
}

func (s *orderingStore) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserves++
	s.next(ctx)
	return s.Forward.Reserve(ctx, req, res)
}

func (s *orderingStore) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peeks++
	s.next(ctx)
	return s.Store.Peek(ctx, req)
}

func (s *orderingStore) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.Store.Adjust(ctx, req)
	if err == nil {
		s.log.add(usage{at: time.Now(), seq: s.next(ctx), milli: res.Applied})
	}
	return res, err
}

// settleQueueRun is one run's outcome.
type settleQueueRun struct {
	excess            int64 // millitokens
	grants, waited    int64
	admitted          int64 // millitokens, grants and charges
	reserves, peeks   int64
	utilisation       float64
	chargedBelowAsked int64 // settlements the floor clamped
	failures          int64
}

// runSettleQueue runs the scenario with n waiters settling overshootPct
// above the estimate; it must run inside a synctest bubble.
func runSettleQueue(t *testing.T, n int, overshootPct int64) settleQueueRun {
	t.Helper()
	ctx := context.Background()
	var log usageLog
	st := &orderingStore{Forward: contract.Forward{Store: memstore.New()}, log: &log}
	t.Cleanup(func() { st.Close() })
	c, err := sluice.New(st)
	if err != nil {
		t.Fatal(err)
	}
	const dim = "load#tpm"
	b := sluice.Bucket{Name: dim, Config: sluice.PerPeriod(sluice.Tokens, sqCapacity, time.Second)}
	if err := c.PutBucket(ctx, b); err != nil {
		t.Fatal(err)
	}
	var run settleQueueRun
	var mu sync.Mutex
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for time.Since(start) < sqRun {
				before := time.Now()
				var seq int64
				l, err := c.Wait(within(context.WithValue(ctx, seqKey{}, &seq), t, time.Minute), []sluice.Request{{Dimension: dim, Cost: sqEstimate}})
				if err != nil {
					mu.Lock()
					run.failures++
					mu.Unlock()
					t.Errorf("Wait: %v", err)
					return
				}
				log.add(usage{at: time.Now(), seq: seq, milli: sqEstimate * 1000, grant: true, waited: time.Now().After(before)})
				time.Sleep(50 * time.Millisecond)
				actual := sqEstimate + sqEstimate*overshootPct/100
				s, err := l.Settle(ctx, dim, actual)
				if err != nil {
					t.Errorf("Settle: %v", err)
					return
				}
				if int64(s.Applied) < (actual-sqEstimate)*1000 {
					mu.Lock()
					run.chargedBelowAsked++
					mu.Unlock()
				}
				if err := l.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	end := time.Now()
	for _, u := range log.us {
		run.admitted += u.milli
		if u.grant {
			run.grants++
			if u.waited {
				run.waited++
			}
		}
	}
	run.excess = maxExcess(log.us, sqCapacity*1000, sqCapacity)
	run.reserves, run.peeks = st.reserves, st.peeks
	allowed := float64(sqCapacity*1000 + sqCapacity*end.Sub(start).Milliseconds())
	run.utilisation = float64(run.admitted) / allowed
	return run
}

func TestSettleAboveTheEstimateWhileOthersWaitNeverOverAdmits(t *testing.T) {
	for _, tt := range []struct {
		waiters   int
		overshoot int64
	}{
		{32, 30}, {32, 100}, {128, 30}, {128, 100},
	} {
		t.Run(fmt.Sprintf("%dwaiters/%dpct", tt.waiters, tt.overshoot), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := runSettleQueue(t, tt.waiters, tt.overshoot)
				t.Logf("%d grants (%d waited), %d reserves, %d peeks, %.1f%% of capacity + refill used, %d settlements clamped by the floor",
					r.grants, r.waited, r.reserves, r.peeks, 100*r.utilisation, r.chargedBelowAsked)
				if r.excess > 0 {
					t.Errorf("max over all windows of admitted − (capacity + refill) = %+d tokens (%.0f%% of the capacity), want ≤ 0",
						r.excess/1000, 100*float64(r.excess)/float64(sqCapacity*1000))
				}
			})
		})
	}
}

// TestWaitWithExactEstimatesKeepsThroughput: when settlements match the
// estimates, the confirmation at the valid instant finds nothing to wait
// out, and the bucket's refill is used in full.
func TestWaitWithExactEstimatesKeepsThroughput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := runSettleQueue(t, 32, 0)
		t.Logf("%d grants (%d waited), %d reserves, %d peeks, %.1f%% of capacity + refill used", r.grants, r.waited, r.reserves, r.peeks, 100*r.utilisation)
		if r.excess > 0 {
			t.Errorf("excess %d millitokens, want ≤ 0", r.excess)
		}
		// The bucket allows 5 000 + 5 000 × 8 s = 45 000 tokens; waiters in
		// line take them all but the last estimate or two.
		if r.utilisation < 0.98 {
			t.Errorf("utilisation %.3f, want at least 0.98", r.utilisation)
		}
	})
}
