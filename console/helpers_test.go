package console

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// t0 is the tests' fixed time.
var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// fakeHist is a recorded history: fixed points, callers, live counts and
// events.
type fakeHist struct {
	mu      sync.Mutex
	points  []history.Point
	callers map[string]history.Counts
	live    map[string]history.Counts
	events  []history.Event
	queries []history.Query
}

func (f *fakeHist) Query(_ context.Context, q history.Query) ([]history.Point, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	var out []history.Point
	for _, p := range f.points {
		if !p.Start.Before(q.From) && p.Start.Before(q.To) && p.Start.Truncate(q.Step).Equal(p.Start) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeHist) Callers(_ context.Context, _ string, _, _ time.Time) (map[string]history.Counts, error) {
	return f.callers, nil
}

func (f *fakeHist) Live(dim string) history.Counts {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.live[dim]; ok {
		return c
	}
	return history.Counts{MinRemaining: -1}
}

func (f *fakeHist) Events(n int) []history.Event {
	return append([]history.Event(nil), f.events[:min(n, len(f.events))]...)
}

// countingStore counts the state reads a console makes.
// Once fail is set, its reads fail with that error.
type countingStore struct {
	store.Store
	lists atomic.Int64
	fail  atomic.Pointer[error]
	// leaseDims records the Dimension of each Leases call.
	mu        sync.Mutex
	leaseDims []string
}

func (s *countingStore) Leases(ctx context.Context, q store.LeaseQuery) ([]store.LeaseRecord, error) {
	s.mu.Lock()
	s.leaseDims = append(s.leaseDims, q.Dimension)
	s.mu.Unlock()
	return s.Store.Leases(ctx, q)
}

func (s *countingStore) ListBuckets(ctx context.Context, req store.ListBucketsRequest) ([]store.BucketState, error) {
	s.lists.Add(1)
	if err := s.fail.Load(); err != nil {
		return nil, *err
	}
	return s.Store.ListBuckets(ctx, req)
}

// fixture is a console over a memory store at t0 with three buckets and a
// lease held by alice on "slots".
type fixture struct {
	c     *sluice.Client
	st    *countingStore
	h     *handler
	srv   *httptest.Server
	lease *sluice.Lease
	hist  *fakeHist
	// ticks drives the hub when the fixture ticks by hand.
	ticks chan time.Time
}

func newFixture(t testing.TB, opts ...Option) *fixture {
	t.Helper()
	f := &fixture{st: &countingStore{Store: memstore.New()}, ticks: make(chan time.Time)}
	clock := sluice.ClockFunc(func() time.Time { return t0 })
	c, err := sluice.New(f.st, sluice.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	f.c = c
	ctx := context.Background()
	for _, b := range []sluice.Bucket{
		{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 60, time.Minute)},
		{Name: "openai#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)},
		{Name: "slots", Config: sluice.ConcurrentLimit(2)},
	} {
		if err := c.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.Acquire(ctx, "slots", sluice.WithCaller("alice"), sluice.WithTTL(time.Minute))
	if err != nil || !res.Granted() {
		t.Fatalf("acquire: %v %v", res, err)
	}
	f.lease = res.Lease
	f.hist = &fakeHist{
		callers: map[string]history.Counts{"alice": {Grants: 7, Reserved: 700, Settled: 650}, "bob": {Grants: 3, Refusals: 2}},
		live: map[string]history.Counts{"openai#tpm": {Grants: 12, Refusals: 3, MinRemaining: 400,
			Responses: map[string]int64{"2xx": 10, "429_tokens": 2}, WaitHist: []int64{0, 0, 5, 1}}},
		events: []history.Event{{Time: t0, Kind: "store_error", Dimension: "openai#rpm",
			Detail: "dial redis://ops:hunter2@10.0.0.1:6379/0?password=hunter3 failed"}},
		points: []history.Point{
			{Start: t0.Truncate(time.Minute), Counts: history.Counts{Grants: 5, Refusals: 1}},
			{Start: t0.Truncate(time.Hour), Counts: history.Counts{Grants: 50, Settled: 900}},
		},
	}
	ctx, endStreams := context.WithCancel(context.Background())
	f.h = newHandler(c, append([]Option{withHist(f.hist), WithContext(ctx)}, opts...)...)
	f.h.now = func() time.Time { return t0 }
	f.h.newTicker = func(time.Duration) (<-chan time.Time, func()) { return f.ticks, func() {} }
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", f.h))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	t.Cleanup(endStreams) // before f.srv.Close, which waits for open streams
	return f
}

// withHist sets the console's history to h.
func withHist(h historian) Option { return func(x *handler) { x.hist = h } }

// get fetches path from the fixture's server.
func (f *fixture) get(t testing.TB, path string) (int, string) {
	t.Helper()
	res, err := http.Get(f.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}
