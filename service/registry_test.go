package service

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// gatedStore holds every Adjust until gate is closed: a store call in
// flight, as on a slow network.
type gatedStore struct {
	store.Store
	entered chan struct{}
	gate    chan struct{}
}

func (s *gatedStore) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	s.entered <- struct{}{}
	<-s.gate
	return s.Store.Adjust(ctx, req)
}

// TestRegistryNeverWaitsForALease registers a lease while another lease
// the registry holds is busy in a slow store call: the registry's sweep of
// expired leases must not hold every caller of the server behind it.
func TestRegistryNeverWaitsForALease(t *testing.T) {
	st := &gatedStore{Store: memstore.New(), entered: make(chan struct{}), gate: make(chan struct{})}
	defer close(st.gate)
	c, err := sluice.New(st)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.PutBucket(ctx, sluice.Bucket{Name: "v#tpm", Config: sluice.PerMinute(sluice.Tokens, 1000)}); err != nil {
		t.Fatal(err)
	}
	lease := func() *sluice.Lease {
		res, err := c.Acquire(ctx, "v#tpm", sluice.WithCost(10))
		if err != nil || !res.Granted() {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		return res.Lease
	}
	r := newRegistry(100)
	now := time.Now()
	busy := lease()
	r.put(busy, "", now)
	go func() { _, _ = busy.Adjust(ctx, "v#tpm", 5) }()
	<-st.entered // the lease is now busy in the store
	done := make(chan string)
	go func() { done <- r.put(lease(), "", now.Add(2*time.Second)) }() // a sweep is due
	select {
	case h := <-done:
		if h == "" {
			t.Error("put refused a lease with room to spare")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("put waited for a lease busy in the store")
	}
}

// slowAcquire answers every Acquire only once gate is closed, whatever
// the call's context says: a grant that lands after the caller left.
type slowAcquire struct {
	store.Store
	entered chan struct{}
	gate    chan struct{}
}

func (s *slowAcquire) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	s.entered <- struct{}{}
	<-s.gate
	return s.Store.Acquire(context.WithoutCancel(ctx), req, res)
}

// TestAcquireAfterTheCallerLeft cancels an Acquire while the store is
// deciding it, then lets the store grant: nobody will ever get the lease's
// handle, so the server must release it rather than hold the slot for the
// lease's TTL.
func TestAcquireAfterTheCallerLeft(t *testing.T) {
	st := &slowAcquire{Store: memstore.New(), entered: make(chan struct{}), gate: make(chan struct{})}
	c, s := newServer(t, st, sluice.Bucket{Name: "v#slots", Config: sluice.ConcurrentLimit(1)})
	bg := context.Background()
	ctx, cancel := context.WithCancel(bg)
	errc := make(chan error)
	go func() {
		_, err := (&api{s}).acquire(ctx, &sluicev1.AcquireRequest{Items: []*sluicev1.Item{{Dimension: "v#slots", Cost: 1}}})
		errc <- err
	}()
	<-st.entered
	cancel()
	close(st.gate)
	if err := <-errc; err == nil {
		t.Error("the acquisition of a caller that left answered a lease")
	}
	if n := s.Held(); n != 0 {
		t.Errorf("the server holds %d leases, want 0", n)
	}
	b, err := c.GetBucket(bg, "v#slots")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.Tokens, sluice.Millitokens(1000); got != want {
		t.Errorf("free slots: got %v, want %v (the slot of the caller that left)", got, want)
	}
}

// TestRetryAfterAFailedFirstCall sends a call with an idempotency key
// while the first call with that key is still running; the first one
// fails (its caller gave up): the retry runs on its own rather than
// answer the first call's error.
func TestRetryAfterAFailedFirstCall(t *testing.T) {
	synctest.Test(t, retryAfterAFailedFirstCall)
}

func retryAfterAFailedFirstCall(t *testing.T) {
	_, s := newServer(t, memstore.New())
	ctx := context.Background()
	started, fail := make(chan struct{}), make(chan struct{})
	first := make(chan error)
	go func() {
		_, err := dedupe(ctx, s, "acquire", "app", "k1", nil, func() (*string, error) {
			close(started)
			<-fail
			return nil, context.Canceled
		})
		first <- err
	}()
	<-started
	retry := make(chan error)
	go func() {
		out, err := dedupe(ctx, s, "acquire", "app", "k1", nil, func() (*string, error) {
			ok := "granted"
			return &ok, nil
		})
		if err == nil && *out != "granted" {
			err = errors.New("the retry got another answer: " + *out)
		}
		retry <- err
	}()
	synctest.Wait() // the retry waits for the first call's answer
	close(fail)
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("first call: %v, want its own cancellation", err)
	}
	if err := <-retry; err != nil {
		t.Errorf("retry: %v, want its own answer", err)
	}
}

// slowRelease takes 50 ms over every Release, as a store far away does.
type slowRelease struct{ store.Store }

func (s slowRelease) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	select {
	case <-time.After(50 * time.Millisecond):
	case <-ctx.Done():
		return store.ReleaseResult{}, ctx.Err()
	}
	return s.Store.Release(ctx, req)
}

// TestCloseReleasesInParallel closes a server holding 100 slots on a store
// that takes 50 ms per release, within 2 s: one release after another
// would free 40 of them and leave the rest held until their TTL.
func TestCloseReleasesInParallel(t *testing.T) {
	c, s := newServer(t, slowRelease{memstore.New()}, sluice.Bucket{Name: "v#slots", Config: sluice.ConcurrentLimit(100)})
	ctx := context.Background()
	for range 100 {
		res, err := c.Acquire(ctx, "v#slots")
		if err != nil || !res.Granted() {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		s.leases.put(res.Lease, "", time.Now())
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = s.Close(cctx)
	b, err := c.GetBucket(ctx, "v#slots")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.Tokens, sluice.Millitokens(100_000); got != want {
		t.Errorf("free slots after Close: got %v, want %v", got, want)
	}
}

// countingPeek counts Peek calls and fails everything with
// store.ErrUnavailable while down is set.
type countingPeek struct {
	store.Store
	peeks atomic.Int64
	down  atomic.Bool
}

func (s *countingPeek) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	s.peeks.Add(1)
	if s.down.Load() {
		return nil, store.ErrUnavailable
	}
	return s.Store.Peek(ctx, req)
}

func (s *countingPeek) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	if s.down.Load() {
		return store.ErrUnavailable
	}
	return s.Store.Acquire(ctx, req, res)
}

// TestCostPerCallRead asks with cost 0 (the bucket's cost per call): the
// server reads a dimension's cost once, not once per call, and, failing
// open, a store that went down still gives degraded grants rather than
// errors.
func TestCostPerCallRead(t *testing.T) {
	st := &countingPeek{Store: memstore.New()}
	cfg := sluice.DefaultConfig()
	cfg.FailurePolicy = sluice.FailOpen
	b := sluice.Bucket{Name: "v#tpm", Config: sluice.PerMinute(sluice.Tokens, 100_000)}
	b.Config.CostPerCall = 500
	_, s := newServerWith(t, st, cfg, b)
	ctx := context.Background()
	acquire := func() *sluicev1.AcquireResponse {
		t.Helper()
		out, err := (&api{s}).acquire(ctx, &sluicev1.AcquireRequest{Items: []*sluicev1.Item{{Dimension: "v#tpm"}}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := st.peeks.Load()
	for range 10 {
		if out := acquire(); !out.GetGranted() || out.GetLease().GetItems()[0].GetCost() != 500 {
			t.Fatalf("got %v, want a grant of the cost per call, 500", out)
		}
	}
	if n := st.peeks.Load() - before; n > 1 {
		t.Errorf("10 acquisitions at the cost per call read the bucket %d times, want 1", n)
	}
	st.down.Store(true)
	if out := acquire(); !out.GetGranted() || !out.GetDegraded() {
		t.Errorf("store down, failing open: got %v, want a degraded grant", out)
	}
}

// newServer is a Server on a Client over st holding bs.
func newServer(t *testing.T, st store.Store, bs ...sluice.Bucket) (*sluice.Client, *Server) {
	t.Helper()
	return newServerWith(t, st, sluice.DefaultConfig(), bs...)
}

// newServerWith is newServer with the Client's configuration.
func newServerWith(t *testing.T, st store.Store, cfg sluice.Config, bs ...sluice.Bucket) (*sluice.Client, *Server) {
	t.Helper()
	c, err := sluice.New(st, sluice.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for _, b := range bs {
		if err := c.PutBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}
