package dynamostore

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/ddbtest"
	"github.com/ontopix/sluice/store"
)

// faultRun is the fleet of TestFaultSuite: workers on two clients (two
// store handles) holding slots with WithSlotMany, and their tallies.
type faultRun struct {
	clients               []*sluice.Client
	inside, maxInside     atomic.Int64 // callbacks running now, and the most at once
	grants, unavailable   atomic.Int64
	lastGrant             atomic.Int64 // Unix ns of the latest grant
	unexpected            atomic.Int64
	lastErr               atomic.Value // the latest unavailable error, for failure reports
	stop                  chan struct{}
	wg                    sync.WaitGroup
	t                     *testing.T
	concurrentDim, tpmDim string
}

func (r *faultRun) start(workers int) {
	r.stop = make(chan struct{})
	for w := range workers {
		c := r.clients[w%len(r.clients)]
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			reqs := []sluice.Request{{Dimension: r.concurrentDim, Cost: 1}, {Dimension: r.tpmDim, Cost: 10}}
			for {
				select {
				case <-r.stop:
					return
				default:
				}
				err := c.WithSlotMany(context.Background(), reqs, func(ctx context.Context, _ *sluice.Lease) error {
					n := r.inside.Add(1)
					for m := r.maxInside.Load(); n > m && !r.maxInside.CompareAndSwap(m, n); m = r.maxInside.Load() {
					}
					r.grants.Add(1)
					r.lastGrant.Store(time.Now().UnixNano())
					time.Sleep(10 * time.Millisecond)
					r.inside.Add(-1)
					return nil
				})
				var st *sluice.SlotTimeoutError
				switch {
				case err == nil, errors.As(err, &st):
				case errors.Is(err, sluice.ErrUnavailable):
					r.unavailable.Add(1)
					r.lastErr.Store(err.Error())
					time.Sleep(20 * time.Millisecond)
				case errors.Is(err, sluice.ErrLeaseLost), errors.Is(err, sluice.ErrLeaseExpired), errors.Is(err, store.ErrContention):
				default:
					r.unexpected.Add(1)
					r.t.Errorf("WithSlotMany: unexpected error %v", err)
				}
			}
		}()
	}
}

func (r *faultRun) halt() {
	close(r.stop)
	r.wg.Wait()
}

// recovered waits (bounded by limit) for a grant after since and returns
// how long it took.
func (r *faultRun) recovered(t *testing.T, what string, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	for time.Since(since) < limit {
		if r.lastGrant.Load() > since.UnixNano() {
			d := time.Unix(0, r.lastGrant.Load()).Sub(since)
			t.Logf("%s: first grant %v after recovery", what, d.Round(time.Millisecond))
			return d
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: no grant within %v of recovery; last error: %v", what, limit, r.lastErr.Load())
	return 0
}

// TestFaultSuite runs a fleet — four workers on two sluice clients, each
// client on its own store handle, holding a concurrent slot and tokens
// with WithSlotMany, and a reconciler every second — against its own
// DynamoDB Local (tables in a database file, so that they survive a
// restart) through three faults in turn: the JVM killed with SIGKILL and
// restarted, frozen with SIGSTOP for longer than the operation timeout, and
// every request throttled (ProvisionedThroughputExceeded). While frozen,
// every store operation must fail with ErrUnavailable within the operation
// timeout, or the caller's shorter deadline. After each fault the fleet
// must be granted again (the figures are logged).
//
// At the end, one TTL after the workers stop, one Reconcile settles every
// lease the faults stranded, and balances are exact: the concurrent bucket
// is back to its capacity minus one lease held throughout (so that the
// capacity guard cannot hide a slot restored twice), no more callbacks ever
// ran at once than the slots left, and the tokens bucket was charged for
// every grant and for no more than the grants plus the acquisitions whose
// outcome the faults hid.
//
// These assertions hold whether or not the client retries a failed release
// in the background until the lease's expiry, and whether or not it
// cancels a callback whose renewals fail: a release that never reaches the
// store is settled by the reconciler.
func TestFaultSuite(t *testing.T) {
	const capacity, ttl, opTimeout = 4, 3 * time.Second, time.Second
	srv, err := ddbtest.StartWith(ddbtest.Options{DBPath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tp := newTap()
	mk := func() *dynamodb.Client {
		return ddbtest.NewClient(srv.Endpoint, ClientOptions, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: tp} })
	}
	ctx := context.Background()
	admin := ddbtest.NewClient(srv.Endpoint, ClientOptions)
	table := srv.TableName("faults")
	if err := createTable(ctx, admin, table, false); err != nil {
		t.Fatal(err)
	}
	r := &faultRun{t: t, concurrentDim: "f#concurrent", tpmDim: "f#tpm"}
	var stores []*Store
	for range 2 {
		s := openStore(t, mk(), table, WithTimeout(opTimeout))
		stores = append(stores, s)
		cfg := sluice.DefaultConfig()
		cfg.LeaseTTL = ttl
		cfg.OpTimeout = opTimeout
		cfg.DefaultSlotTimeout = 200 * time.Millisecond // a wait ends after 200 ms
		c, err := sluice.New(s, sluice.WithConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		r.clients = append(r.clients, c)
	}
	s := stores[0]
	// Setup and the final checks go through a store with a long timeout: a
	// cold JVM on a loaded machine can take longer than the fleet's 1 s.
	adm := openStore(t, admin, table, WithTimeout(30*time.Second))
	// A tokens bucket that refills slowly, so that the charges can be
	// accounted for: about 32 millitokens a second.
	tpm := store.Bucket{Name: r.tpmDim, Config: bucket.PerPeriod(bucket.Tokens, 1_000_000, 366*24*time.Hour)}
	began := time.Now()
	put(t, adm, began, store.Bucket{Name: r.concurrentDim, Config: bucket.ConcurrentSlots(capacity)})
	put(t, adm, began, tpm)
	live := acquireAt(t, adm, began, time.Hour, false, store.Item{Dimension: r.concurrentDim})

	stopRec := make(chan struct{})
	recDone := make(chan struct{})
	go func() { // the reconciler, every second, as a scheduled job would
		defer close(recDone)
		for {
			select {
			case <-stopRec:
				return
			case <-time.After(time.Second):
				_, _ = stores[1].Reconcile(ctx, store.ReconcileRequest{Now: time.Now(), Limit: store.DefaultReconcileLimit})
			}
		}
	}()
	r.start(4)
	time.Sleep(time.Second)
	t.Logf("before the faults: %d grants", r.grants.Load())

	// kill -9 and restart.
	srv.Kill()
	time.Sleep(time.Second)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	r.recovered(t, "SIGKILL and restart", time.Now(), 30*time.Second)
	time.Sleep(500 * time.Millisecond)

	// SIGSTOP for longer than the operation timeout.
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	probe := frozen(t, s, time.Now(), r.concurrentDim, opTimeout, ttl)
	if err := srv.Cont(); err != nil {
		t.Fatal(err)
	}
	r.recovered(t, "SIGSTOP then SIGCONT", time.Now(), 30*time.Second)
	time.Sleep(500 * time.Millisecond)

	// Throttled: every request answered ProvisionedThroughputExceeded.
	tp.setFault(func(string) *http.Response {
		return apiError(400, "ProvisionedThroughputExceededException", "The level of configured provisioned throughput for the table was exceeded.", nil)
	})
	time.Sleep(time.Second)
	tp.setFault(nil)
	r.recovered(t, "throttling", time.Now(), 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	r.halt()
	close(stopRec)
	<-recDone

	// One TTL later, one reconcile settles what the faults stranded.
	time.Sleep(ttl + 100*time.Millisecond)
	now := time.Now()
	rec, err := adm.Reconcile(ctx, store.ReconcileRequest{Now: now, Limit: store.DefaultReconcileLimit})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d grants, %d unavailable errors, at most %d callbacks at once; the last reconcile reclaimed %d leases",
		r.grants.Load(), r.unavailable.Load(), r.maxInside.Load(), rec.Reclaimed)
	if r.maxInside.Load() > capacity-1 {
		t.Errorf("%d callbacks ran at once; at most %d slots were free", r.maxInside.Load(), capacity-1)
	}
	st, err := adm.Peek(ctx, store.PeekRequest{Now: now, Dimensions: []string{r.concurrentDim, r.tpmDim}})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Tokens != (capacity-1)*bucket.Milli || st[0].ActiveLeases != 1 {
		t.Errorf("%s after one reconcile: %d millitokens, %d leases; want %d and 1 (the live lease)", r.concurrentDim, st[0].Tokens, st[0].ActiveLeases, (capacity-1)*bucket.Milli)
	}
	leases, err := adm.Leases(ctx, store.LeaseQuery{Now: now})
	if err != nil || len(leases) != 1 || leases[0].ID != live {
		t.Errorf("leases after one reconcile = %+v, %v; want the live one only (the frozen probe's lease is %s)", leases, err, probe)
	}
	// The refill since the start bounds what the bucket got back.
	refill := bucket.Refill(tpm.Config.Limits(), bucket.State{Last: began.UnixMilli()}, now.UnixMilli()+1000).Tokens
	charged := 1_000_000*bucket.Milli - st[1].Tokens
	if lo, hi := 10*bucket.Milli*r.grants.Load()-refill, 10*bucket.Milli*(r.grants.Load()+r.unavailable.Load()); charged < lo || charged > hi {
		t.Errorf("%s charged %d millitokens for %d grants and %d acquisitions of unknown outcome; want %d..%d", r.tpmDim, charged, r.grants.Load(), r.unavailable.Load(), lo, hi)
	}
}

// frozen checks, with the server frozen, that every store operation fails
// with ErrUnavailable within the operation timeout (plus a generous
// second), and within a caller's shorter deadline. It returns the id of
// its acquisitions.
//
// Their outcome is unknown, as the fleet's are during a fault: the
// request sits in the frozen server's socket and may be applied when it
// resumes, after the caller gave up. Such a grant has no holder to release
// it and comes back after its TTL and one reconcile, so the probe takes
// the fleet's lease TTL: the final reconcile, one TTL after the workers
// stop, must find it expired like any other lease the faults stranded.
func frozen(t *testing.T, s *Store, now time.Time, dim string, opTimeout, ttl time.Duration) store.LeaseID {
	t.Helper()
	ctx := context.Background()
	id := store.NewLeaseID()
	ops := []struct {
		name string
		f    func(context.Context) error
	}{
		{"Acquire", func(ctx context.Context) error {
			var res store.AcquireResult
			return s.Acquire(ctx, &store.AcquireRequest{Now: now, Items: []store.Item{{Dimension: dim}}, ID: id, TTL: ttl}, &res)
		}},
		{"Release", func(ctx context.Context) error {
			_, err := s.Release(ctx, store.ReleaseRequest{Now: now, ID: store.NewLeaseID()})
			return err
		}},
		{"Extend", func(ctx context.Context) error {
			_, err := s.Extend(ctx, store.ExtendRequest{Now: now, ID: store.NewLeaseID(), TTL: ttl})
			return err
		}},
		{"Peek", func(ctx context.Context) error {
			_, err := s.Peek(ctx, store.PeekRequest{Now: now, Dimensions: []string{dim}})
			return err
		}},
		{"Reconcile", func(ctx context.Context) error {
			_, err := s.Reconcile(ctx, store.ReconcileRequest{Now: now, Limit: store.DefaultReconcileLimit})
			return err
		}},
	}
	for _, op := range ops {
		began := time.Now()
		err := op.f(ctx)
		took := time.Since(began)
		t.Logf("frozen: %s failed after %v", op.name, took.Round(time.Millisecond))
		if !errors.Is(err, store.ErrUnavailable) || took > opTimeout+time.Second {
			t.Errorf("frozen: %s = %v after %v; want ErrUnavailable within %v", op.name, err, took, opTimeout)
		}
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := ops[0].f(short)
	if took := time.Since(began); !errors.Is(err, store.ErrUnavailable) || took > 200*time.Millisecond+time.Second {
		t.Errorf("frozen: Acquire with a 200ms deadline = %v after %v; want ErrUnavailable by the deadline", err, took)
	}
	return id
}
