package pgstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/storetest"
)

// BenchmarkConformance runs the shared suite's benchmarks.
func BenchmarkConformance(b *testing.B) {
	storetest.RunBenchmarks(b, storetest.Harness{NewStore: func(tb testing.TB) store.Store { return newStore(tb) }})
}

// naive is the baseline the issue compares against: the textbook
// transaction, BEGIN; SELECT … FOR UPDATE; UPDATE …; COMMIT, with the math
// in Go (four round trips). It exists only in this test file.
type naive struct {
	pool *pgxpool.Pool
	sel  string
	upd  string
}

func newNaive(s *Store) *naive {
	sch := pgx.Identifier{s.Schema()}.Sanitize()
	return &naive{
		pool: s.pool,
		sel: `SELECT capacity, refill_amount, refill_period_ms, tokens, last_refill_ms FROM ` + sch +
			`.buckets WHERE name = $1 FOR UPDATE`,
		upd: `UPDATE ` + sch + `.buckets SET tokens = $2, last_refill_ms = $3, version = version + 1 WHERE name = $1`,
	}
}

func (n *naive) acquire(ctx context.Context, dim string, now time.Time) (bool, error) {
	tx, err := n.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx)
	var capacity, amount, period int64
	var st bucket.State
	if err := tx.QueryRow(ctx, n.sel, dim).Scan(&capacity, &amount, &period, &st.Tokens, &st.Last); err != nil {
		return false, err
	}
	l := bucket.Limits{Type: bucket.Requests, Capacity: capacity * bucket.Milli, Amount: amount * bucket.Milli, Period: period}
	next, _, ok := bucket.Take(l, st, now.UnixMilli(), bucket.Milli)
	if !ok {
		return false, tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, n.upd, dim, next.Tokens, next.Last); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// BenchmarkAcquire compares pgstore with the naive transaction: one hot
// bucket and 100 buckets, 1 and 16 workers, each worker with a connection
// of its own. It reports acquisitions per second (acq/s).
func BenchmarkAcquire(b *testing.B) {
	for _, impl := range []string{"pgstore", "naive"} {
		for _, buckets := range []int{1, 100} {
			for _, workers := range []int{1, 16} {
				name := fmt.Sprintf("%s/buckets=%d/workers=%d", impl, buckets, workers)
				b.Run(name, func(b *testing.B) { benchAcquire(b, impl, buckets, workers) })
			}
		}
	}
}

func benchAcquire(b *testing.B, impl string, nBuckets, workers int) {
	pool := pgtest.Pool(b, func(c *pgxpool.Config) { c.MaxConns = int32(workers) })
	s := newStoreOn(b, pool, WithCallerClock())
	ctx := context.Background()
	dims := make([]string, nBuckets)
	for i := range dims {
		dims[i] = fmt.Sprintf("bench#b%03d", i)
		// Large enough never to run dry during the benchmark.
		put(b, s, store.Bucket{Name: dims[i], Config: bucket.PerPeriod(bucket.Requests, bucket.MaxCapacity, time.Minute)})
	}
	nv := newNaive(s)
	var next atomic.Int64
	var wg sync.WaitGroup
	lats := make([][]time.Duration, workers)
	b.ResetTimer()
	for w := range workers {
		wg.Go(func() {
			var res store.AcquireResult
			req := &store.AcquireRequest{Items: []store.Item{{Cost: 1}}, TTL: time.Minute}
			for i := w; ; i++ {
				if next.Add(1) > int64(b.N) {
					return
				}
				dim := dims[i%nBuckets]
				var ok bool
				var err error
				start := time.Now()
				if impl == "naive" {
					ok, err = nv.acquire(ctx, dim, time.Now())
				} else {
					req.Now, req.ID, req.Items[0].Dimension = time.Now(), store.NewLeaseID(), dim
					err = s.Acquire(ctx, req, &res)
					ok = res.Granted
				}
				lats[w] = append(lats[w], time.Since(start))
				if err != nil || !ok {
					b.Errorf("acquire: %v (granted %v)", err, ok)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acq/s")
	all := slices.Concat(lats...)
	if len(all) > 0 {
		slices.Sort(all)
		b.ReportMetric(float64(all[len(all)*99/100])/1e6, "p99-ms")
		b.ReportMetric(float64(all[len(all)-1])/1e6, "max-ms")
	}
}
