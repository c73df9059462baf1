package history_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/store"
)

// usageStore wraps a store that keeps usage history: it counts the
// PutUsage calls by dimension, and can fail them or send them twice.
type usageStore struct {
	store.Store
	u store.Usager

	mu   sync.Mutex
	puts map[string]int // PutUsage calls by dimension, failed ones included
	// fail fails the next fail calls; written makes a failing call write
	// its rows first, as when the answer of a write that succeeded is
	// lost.
	fail    int
	written bool
	// twice sends every call twice, as a driver that resends would.
	twice bool
	// around, when set, is called before and after each write reaches
	// the store, with the moment ("before" or "after").
	around func(moment string)
}

var errInjected = errors.New("injected store failure")

func newUsageStore(t *testing.T, st store.Store) *usageStore {
	t.Helper()
	u, ok := st.(store.Usager)
	if !ok {
		t.Fatalf("%T keeps no usage history", st)
	}
	return &usageStore{Store: st, u: u, puts: map[string]int{}}
}

func (s *usageStore) PutUsage(ctx context.Context, rows []store.UsageRow, r store.UsageRetention) error {
	s.mu.Lock()
	if len(rows) > 0 {
		s.puts[rows[0].Dimension]++
	}
	fail, written, twice, around := s.fail > 0, s.written, s.twice, s.around
	if fail {
		s.fail--
	}
	s.mu.Unlock()
	if around != nil {
		around("before")
		defer around("after")
	}
	if fail && !written {
		return errInjected
	}
	if err := s.u.PutUsage(ctx, rows, r); err != nil {
		return err
	}
	if twice {
		if err := s.u.PutUsage(ctx, rows, r); err != nil {
			return err
		}
	}
	if fail {
		return errInjected
	}
	return nil
}

func (s *usageStore) ListUsage(ctx context.Context, q store.UsageQuery) ([]store.UsageRow, error) {
	return s.u.ListUsage(ctx, q)
}

// calls returns the PutUsage calls so far by dimension.
func (s *usageStore) calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.puts)
}

// liveOnly hides a store's optional capabilities.
type liveOnly struct{ store.Store }

// totals are the compared fields of history.Counts.
type totals struct {
	Grants, Refusals, Degraded, Errors, Waits int64
	WaitSum                                   time.Duration
	Reserved, Settled, Debt                   int64
}

// want is what the test saw, by dimension and caller: the totals the
// recorder must report.
type want struct {
	mu sync.Mutex
	m  map[[2]string]*totals
}

func newWant() *want { return &want{m: map[[2]string]*totals{}} }

func (w *want) at(dim, caller string) *totals {
	k := [2]string{dim, caller}
	c := w.m[k]
	if c == nil {
		c = new(totals)
		w.m[k] = c
	}
	return c
}

// observer counts what the Client reports, for single-dimension
// acquisitions.
func (w *want) observer() *sluice.Observer {
	return &sluice.Observer{
		Acquired: func(_ context.Context, e sluice.AcquireEvent) {
			w.mu.Lock()
			defer w.mu.Unlock()
			c := w.at(e.Dimensions[0].Dimension, e.Caller)
			switch {
			case e.Err != nil:
				c.Errors++
			case e.Outcome == sluice.Granted:
				c.Grants++
				if len(e.Results) > 0 {
					c.Reserved += e.Results[0].Cost
				} else {
					c.Reserved += e.Dimensions[0].Cost
				}
				if e.Degraded {
					c.Degraded++
				}
			default:
				c.Refusals++
			}
		},
		Waited: func(_ context.Context, e sluice.WaitEvent) {
			w.mu.Lock()
			defer w.mu.Unlock()
			c := w.at(e.Dimensions[0].Dimension, e.Caller)
			c.Waits++
			c.WaitSum += e.Waited
		},
		Settled: func(_ context.Context, e sluice.SettleEvent) {
			if e.Err != nil {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			c := w.at(e.Dimension, e.Caller)
			c.Settled += e.Actual
			c.Debt += max(0, e.Actual-e.Estimate)
		},
	}
}

// total returns the totals of dim: one caller's, or every caller's when
// caller is "".
func (w *want) total(dim, caller string) totals {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out totals
	for k, c := range w.m {
		if k[0] == dim && (caller == "" || k[1] == caller) {
			out.add(*c)
		}
	}
	return out
}

// of returns the totals of dim and caller, "" being one caller.
func (w *want) of(dim, caller string) totals {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.m[[2]string{dim, caller}]; c != nil {
		return *c
	}
	return totals{}
}

// add adds c to sum.
func (sum *totals) add(c totals) {
	sum.Grants += c.Grants
	sum.Refusals += c.Refusals
	sum.Degraded += c.Degraded
	sum.Errors += c.Errors
	sum.Waits += c.Waits
	sum.WaitSum += c.WaitSum
	sum.Reserved += c.Reserved
	sum.Settled += c.Settled
	sum.Debt += c.Debt
}

// sumPoints adds the compared fields of every point, and checks that each
// point's histogram counts its waits.
func sumPoints(t *testing.T, ps []history.Point) totals {
	t.Helper()
	var out totals
	for _, p := range ps {
		var n int64
		for _, h := range p.Counts.WaitHist {
			n += h
		}
		if n != p.Counts.Waits {
			t.Errorf("point %s: histogram counts %d waits, Waits = %d", p.Start.Format(time.RFC3339), n, p.Counts.Waits)
		}
		out.add(compared(p.Counts))
	}
	return out
}

// compared returns the compared fields of c.
func compared(c history.Counts) totals {
	return totals{Grants: c.Grants, Refusals: c.Refusals, Degraded: c.Degraded, Errors: c.Errors, Waits: c.Waits,
		WaitSum: c.WaitSum, Reserved: c.Reserved, Settled: c.Settled, Debt: c.Debt}
}

// load runs workers goroutines of iters acquisitions each on c: worker i
// calls as callers[i%len(callers)] on dims[i%len(dims)], by Acquire (and,
// every fourth, by Wait bounded by a second), settling each grant to its
// cost ± 20 tokens, and sleeping step between acquisitions. It returns the
// leases it got, and the waits that got none.
func load(t *testing.T, c *sluice.Client, dims, callers []string, workers, iters int, step time.Duration) (leases, failedWaits int64) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range workers {
		dim, caller := dims[i%len(dims)], callers[i%len(callers)]
		wg.Go(func() {
			for j := range iters {
				var l *sluice.Lease
				if j%4 == 3 {
					wctx, cancel := context.WithTimeout(ctx, time.Second)
					l, _ = c.Wait(wctx, []sluice.Request{{Dimension: dim, Cost: 100}}, sluice.WithCaller(caller))
					cancel()
					if l == nil {
						mu.Lock()
						failedWaits++
						mu.Unlock()
					}
				} else {
					res, err := c.Acquire(ctx, dim, sluice.WithCost(100), sluice.WithCaller(caller))
					if err != nil {
						t.Error(err)
						return
					}
					l = res.Lease
				}
				if l != nil {
					mu.Lock()
					leases++
					mu.Unlock()
					if _, err := l.Settle(ctx, dim, int64(100+(j%3-1)*20)); err != nil {
						t.Error(err)
					}
					_ = l.Release(ctx)
				}
				time.Sleep(step)
			}
		})
	}
	wg.Wait()
	return leases, failedWaits
}

// newClient returns a client on st with the test buckets, observed by obs.
// Its store calls may take up to 30 s: a loaded test machine stalls the
// servers (DynamoDB Local most) well past the default 2 s.
func newClient(t *testing.T, st store.Store, obs ...*sluice.Observer) *sluice.Client {
	t.Helper()
	cfg := sluice.DefaultConfig()
	cfg.OpTimeout = testTimeout
	c, err := sluice.New(st, sluice.WithConfig(cfg), sluice.WithObserver(sluice.Observers(obs...)))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []sluice.Bucket{
		{Name: "openai#tpm", Config: sluice.PerMinute(sluice.Tokens, 3_000)},
		{Name: "anthropic#tpm", Config: sluice.PerMinute(sluice.Tokens, 2_000)},
		{Name: "idle#tpm", Config: sluice.PerMinute(sluice.Tokens, 5_000)},
	} {
		if err := c.PutBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// query returns the totals of dim and caller over the last two hours at
// step, summed over the points.
func query(t *testing.T, r *history.Recorder, dim, caller string, step time.Duration) totals {
	t.Helper()
	now := time.Now()
	ps, err := r.Query(context.Background(), history.Query{Dimension: dim, Caller: caller,
		From: now.Add(-2 * time.Hour), To: now.Add(time.Minute), Step: step})
	if err != nil {
		t.Fatalf("Query(%s, %q, %s): %v", dim, caller, step, err)
	}
	return sumPoints(t, ps)
}

// checkTotals compares a recorder's totals of dim at a minute and an
// hour step, all callers and each one, with w's.
func checkTotals(t *testing.T, r *history.Recorder, w *want, dim string, callers []string) {
	t.Helper()
	for _, caller := range append([]string{""}, callers...) {
		for _, step := range []time.Duration{time.Minute, time.Hour} {
			if got, want := query(t, r, dim, caller, step), w.total(dim, caller); got != want {
				t.Errorf("totals of %s, caller %q, step %s:\n got %+v\nwant %+v", dim, caller, step, got, want)
			}
		}
	}
}
