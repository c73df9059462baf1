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
	"github.com/ontopix/sluice/store"
)

// TestManyHoldersRelease releases 100 slots of one bucket at once, from
// four store handles (four processes of a fleet): every release must
// succeed within the store's default timeout, and every slot come back
// exactly once. Releases of one bucket row used to retry a lost version
// race in lockstep until the timeout and report ErrUnavailable.
func TestManyHoldersRelease(t *testing.T) {
	const holders = 100
	db := newClient()
	table := newTable(t, db)
	stores := make([]*Store, 4)
	for i := range stores {
		stores[i] = openStore(t, newClient(), table)
	}
	put(t, stores[0], t0, store.Bucket{Name: "v#concurrent", Config: bucket.ConcurrentSlots(holders)})
	ids := make([]store.LeaseID, holders)
	for i := range ids {
		ids[i] = acquireAt(t, stores[i%4], t0, time.Hour, false, store.Item{Dimension: "v#concurrent"})
	}
	var failed, released atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := stores[(i+1)%4].Release(context.Background(), store.ReleaseRequest{Now: t0, ID: id})
			if err != nil {
				failed.Add(1)
				t.Errorf("release %d: %v", i, err)
				return
			}
			if r.Released {
				released.Add(1)
			}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	t.Logf("%d concurrent releases from 4 handles took %v", holders, time.Since(began))
	if failed.Load() != 0 || released.Load() != holders {
		t.Fatalf("%d releases failed, %d released; want 0 and %d", failed.Load(), released.Load(), holders)
	}
	st := peekOne(t, stores[0], "v#concurrent")
	if st.Tokens != holders*bucket.Milli || st.ActiveLeases != 0 {
		t.Errorf("after: %d millitokens, %d leases; want %d and 0", st.Tokens, st.ActiveLeases, holders*bucket.Milli)
	}
}

// TestLeaseLimit fills a bucket's holders map to the store's limit: the
// next recorded acquisition fails with a *LeaseLimitError naming the
// bucket and the limit, which is neither ErrUnavailable nor contention (a
// fail-open client returns it instead of granting a degraded lease); a
// release makes room again.
func TestLeaseLimit(t *testing.T) {
	for _, readFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast", true: "readfirst"}[readFirst], func(t *testing.T) {
			opts := []Option{WithMaxLeasesPerBucket(3)}
			if readFirst {
				opts = append(opts, WithReadThenTransact())
			}
			s := newStore(t, opts...)
			put(t, s, t0, store.Bucket{Name: "v#concurrent", Config: bucket.ConcurrentSlots(10)})
			put(t, s, t0, store.Bucket{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)})
			var ids []store.LeaseID
			for range 3 {
				ids = append(ids, acquireAt(t, s, t0, time.Minute, false, store.Item{Dimension: "v#concurrent"}))
			}
			var res store.AcquireResult
			req := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "v#rpm"}, {Dimension: "v#concurrent"}}, ID: store.NewLeaseID(), TTL: time.Minute}
			err := s.Acquire(context.Background(), req, &res)
			var le *LeaseLimitError
			if !errors.As(err, &le) || le.Dimension != "v#concurrent" || le.Limit != 3 || !errors.Is(err, ErrTooManyLeases) ||
				errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrContention) {
				t.Fatalf("acquire beyond the limit = %v; want a LeaseLimitError on v#concurrent, limit 3", err)
			}
			open, err := sluice.New(s, sluice.WithConfig(failOpen()))
			if err != nil {
				t.Fatal(err)
			}
			if r, err := open.Acquire(context.Background(), "v#concurrent"); !errors.Is(err, ErrTooManyLeases) {
				t.Errorf("fail-open client = %+v, %v; want ErrTooManyLeases", r, err)
			}
			st := peekOne(t, s, "v#concurrent")
			if st.Tokens != 7*bucket.Milli || st.ActiveLeases != 3 {
				t.Errorf("refused acquisitions changed the bucket: %+v", st)
			}
			if st := peekOne(t, s, "v#rpm"); st.Tokens != 100*bucket.Milli {
				t.Errorf("refused acquisition took from v#rpm: %+v", st)
			}
			if _, err := s.Release(context.Background(), store.ReleaseRequest{Now: t0, ID: ids[0]}); err != nil {
				t.Fatal(err)
			}
			acquireAt(t, s, t0, time.Minute, false, store.Item{Dimension: "v#concurrent"})
		})
	}
	if _, err := New(newClient(), "sluice-x", WithMaxLeasesPerBucket(MaxLeasesPerBucket+1)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("New with too large a limit = %v; want ErrInvalid", err)
	}
}

// TestReleaseUnknownOutcome applies a Release's transaction but loses every
// answer the SDK gets for it (a 500 or a reset connection after the write,
// SDKMaxAttempts times): the outcome is unknown, not an outage. The store
// sends the same request again (same ClientRequestToken, so DynamoDB
// answers success without applying it twice) and reports the release; the
// slot comes back once. It used to report ErrUnavailable for a release
// that had happened.
func TestReleaseUnknownOutcome(t *testing.T) {
	for _, reset := range []bool{false, true} {
		t.Run(map[bool]string{false: "500", true: "reset"}[reset], func(t *testing.T) {
			l := &lossy{base: http.DefaultTransport}
			db := newClient(func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: l} })
			s := openStore(t, db, newTable(t, db))
			put(t, s, t0, store.Bucket{Name: "v#concurrent", Config: bucket.ConcurrentSlots(3)})
			acquireAt(t, s, t0, time.Hour, false, store.Item{Dimension: "v#concurrent"}) // keeps the balance below capacity
			id := acquireAt(t, s, t0, time.Hour, false, store.Item{Dimension: "v#concurrent"})
			l.arm("TransactWriteItems", SDKMaxAttempts, reset)
			r, err := s.Release(context.Background(), store.ReleaseRequest{Now: t0, ID: id})
			if err != nil || !r.Released || len(r.Restored) != 1 {
				t.Fatalf("release = %+v, %v; want released, one slot restored", r, err)
			}
			if n := l.sent("TransactWriteItems"); n <= SDKMaxAttempts {
				t.Fatalf("TransactWriteItems sent %d times; the fault did not exhaust the SDK's attempts", n)
			}
			if st := peekOne(t, s, "v#concurrent"); st.Tokens != 2000 || st.ActiveLeases != 1 {
				t.Errorf("after: %+v; want 2000 millitokens (one slot back, once) and one lease", st)
			}
		})
	}
}
