package recorder_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/recorder"
	"github.com/ontopix/sluice/internal/cmd/verify"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

var buckets = []store.Bucket{
	{Name: "api#rps", Config: sluice.PerPeriod(sluice.Requests, 20, 200*time.Millisecond)},
	{Name: "api#tps", Config: sluice.PerPeriod(sluice.Tokens, 300, 200*time.Millisecond)},
	{Name: "tts#concurrent", Config: sluice.ConcurrentLimit(2)},
}

// overAdmitting refills a bucket whenever it would deny: a broken store.
type overAdmitting struct{ contract.Forward }

func (o overAdmitting) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	if err := o.Store.Acquire(ctx, req, res); err != nil || res.Granted {
		return err
	}
	for _, b := range buckets {
		if err := o.PutBucket(ctx, store.PutBucketRequest{Now: req.Now, Bucket: b, Reset: true}); err != nil {
			return err
		}
	}
	return o.Store.Acquire(ctx, req, res)
}

// hammer runs 16 goroutines acquiring, settling and releasing for 400 ms.
func hammer(t *testing.T, inner store.Store, saturate bool) *verify.Report {
	t.Helper()
	ctx := context.Background()
	rec := recorder.New(inner)
	c, err := sluice.New(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range buckets {
		if err := c.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	stop := start.Add(400 * time.Millisecond)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				reqs := []sluice.Request{{Dimension: "api#rps", Cost: 1}, {Dimension: "api#tps", Cost: 20}}
				if w%4 == 0 {
					reqs = []sluice.Request{{Dimension: "tts#concurrent", Cost: 1}}
				}
				res, err := c.AcquireMany(ctx, reqs)
				if err != nil {
					t.Error(err)
					return
				}
				if !res.Granted() {
					time.Sleep(time.Millisecond)
					continue
				}
				if w%4 != 0 {
					if _, err := res.Lease.Settle(ctx, "api#tps", int64(10+i%25)); err != nil {
						t.Error(err)
					}
				} else {
					time.Sleep(2 * time.Millisecond)
				}
				if err := res.Lease.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	r, err := verify.Check(verify.Input{Buckets: buckets, Events: rec.Events(), Start: start, End: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	snap := rec.Snapshot()
	for _, d := range r.Dimensions {
		if got := snap[d.Name].Granted; got != int64(d.Grants) {
			t.Errorf("%s: counters say %d grants, log %d", d.Name, got, d.Grants)
		}
		if saturate && d.Name != "api#rps" && snap[d.Name].Denied == 0 { // api#tps is the binding one
			t.Errorf("%s: never denied; the test does not saturate it", d.Name)
		}
	}
	if snap["tts#concurrent"].InFlight != 0 {
		t.Errorf("in flight after all releases: %d", snap["tts#concurrent"].InFlight)
	}
	return r
}

func TestMemstoreNeverExceeds(t *testing.T) {
	r := hammer(t, memstore.New(), true)
	for _, d := range r.Dimensions {
		if !d.OK() {
			t.Errorf("%s: exceeded=%v excess=%d problems=%v", d.Name, d.Exceeded, d.WorstExcess, d.Problems)
		}
	}
}

func TestOverAdmittingStoreIsCaught(t *testing.T) {
	r := hammer(t, overAdmitting{contract.Forward{Store: memstore.New()}}, false)
	for _, d := range r.Dimensions {
		if !d.Exceeded {
			t.Errorf("%s: an over-admitting store passed (excess %d)", d.Name, d.WorstExcess)
		}
	}
}

func TestReconcileRefused(t *testing.T) {
	if _, err := recorder.New(memstore.New()).Reconcile(context.Background(), store.ReconcileRequest{}); err != recorder.ErrReconcile {
		t.Fatalf("got %v", err)
	}
}
