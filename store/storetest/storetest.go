// Package storetest is the conformance suite every Sluice store runs: one
// set of tests and benchmarks that defines what a correct store.Store does,
// in the manner of gocloud's drivertest and database/sql/driver test kits.
//
// A store's own test calls Run with a Harness that opens a fresh, empty
// store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			NewStore: func(tb testing.TB) store.Store { return memstore.New() },
//		})
//	}
//
//	func BenchmarkConformance(b *testing.B) {
//		storetest.RunBenchmarks(b, storetest.Harness{NewStore: ...})
//	}
//
// The suite calls the store through the same checks package sluice's
// Client applies (internal/contract): requests reach the store validated
// and defaulted, and listings are sorted and truncated for it, so the
// errors the suite expects for bad input are the Client's. The benchmarks
// call the store directly, with valid requests.
//
// Every test passes time explicitly (a fixed base time plus offsets) and
// never sleeps, so a store must honour the Now of each request: a store with
// a server clock runs the suite in its caller-clock mode.
// The usage-history group (store.Usager, which takes no Now) is the
// exception: usage rows expire by the wall clock, so it writes rows of the
// last few hours and still never sleeps.
//
// The suite also replays the golden vectors in testdata/vectors at the
// repository root (see that directory's README.md), which pin the exact
// integer results every store, in Go or in Lua, must produce.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Harness tells the suite how to open the store under test.
type Harness struct {
	// NewStore returns a fresh, empty store that honours the Now passed in
	// requests. It is called once per test; it should register any cleanup
	// with tb.Cleanup. The suite calls Close itself only in the test of
	// Close. Required.
	NewStore func(tb testing.TB) store.Store

	// VectorsDir is the directory holding the golden vectors. Empty means
	// testdata/vectors under the nearest ancestor of the working directory
	// that contains go.mod.
	VectorsDir string

	// AlwaysRecords declares that the store writes a lease record for every
	// grant, even a requests/tokens acquisition that did not ask for one
	// (the contract allows it). The suite then expects Recorded to be true
	// for every grant and skips the vectors whose expectations depend on a
	// lease having no record.
	AlwaysRecords bool

	// ModelSequences is the number of random sequences the model-based
	// test runs; 0 means DefaultModelSequences. The -sluice.sequences flag
	// and the SLUICE_MODEL_SEQUENCES environment variable override it.
	ModelSequences int

	// OpenHandle, when set, opens another handle on the same backend as s
	// (its own connections, as another process would have). The
	// linearizability test gives each concurrent client its own handle;
	// without it they share s.
	OpenHandle func(tb testing.TB, s store.Store) store.Store

	// LinearizeRounds is the number of concurrent histories the
	// linearizability test records and checks; 0 means 5.
	LinearizeRounds int

	// Goroutines is the number of goroutines the concurrency tests use;
	// 0 means 64.
	Goroutines int

	// SingleVendorAcquire declares that the store rejects an acquisition
	// whose dimensions belong to different vendors (a dimension's vendor is
	// its name up to the first '#') with an error matching
	// store.ErrInvalid, changing nothing: redisstore does so on a Redis
	// Cluster, where each vendor's keys live in their own slot. The suite
	// then acquires several dimensions at once only within one vendor
	// (renamed dimensions, same assertions), checks that openai#rpm with
	// anthropic#rpm is rejected that way, and skips, saying so, any golden
	// vector that mixes vendors in one acquisition.
	SingleVendorAcquire bool

	// DedupesOps declares that the store recognises an operation id (the
	// Op of a request) it applied within store.OpWindow and answers the
	// same request sent again as it answered it, changing nothing: a store
	// whose driver sends a request again after its reply was lost
	// (redisstore). The "Resend" tests then send each operation twice and
	// expect one application and the first answer; without it they check
	// only the operations whose second application changes nothing in any
	// store.
	DedupesOps bool

	// PrepareUsage, when set, readies a store that the usage group
	// (store.Usager) is about to use, e.g. creating the table its usage
	// history lives in. It is called once per usage test, after NewStore.
	PrepareUsage func(tb testing.TB, s store.Store)
}

// Base is the fixed time every test starts at: 2026-01-01T00:00:00Z. Tests
// express every instant as a millisecond offset from it.
var Base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// At returns Base plus ms milliseconds.
func At(ms int64) time.Time { return Base.Add(time.Duration(ms) * time.Millisecond) }

// Run runs the whole conformance suite against the store h opens.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewStore == nil {
		t.Fatal("storetest: Harness.NewStore is required")
	}
	// The optional operations' own groups run only for a store that
	// implements them; the other groups leave out what it lacks.
	caps := capabilitiesOf(h.NewStore(t))
	optional := func(name, op string, f func(*testing.T, Harness)) {
		t.Run(name, func(t *testing.T) {
			caps.need(t, op)
			f(t, h)
		})
	}
	t.Run("Acquire", func(t *testing.T) { testAcquire(t, h) })
	t.Run("Leases", func(t *testing.T) { testLeaseOps(t, h) })
	optional("Cooldown", "cooldown", testCooldown)
	optional("Sync", "sync", testSync)
	t.Run("Skew", func(t *testing.T) { testSkew(t, h) })
	t.Run("Admin", func(t *testing.T) { testAdmin(t, h) })
	t.Run("ConditionalPut", func(t *testing.T) { testConditionalPut(t, h) })
	t.Run("Reconcile", func(t *testing.T) { testReconcile(t, h) })
	t.Run("Lifecycle", func(t *testing.T) { testLifecycle(t, h) })
	t.Run("BadInput", func(t *testing.T) { testBadInput(t, h) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, h) })
	t.Run("Vectors", func(t *testing.T) { testVectors(t, h) })
	t.Run("Model", func(t *testing.T) { testModel(t, h) })
	t.Run("Linearizable", func(t *testing.T) { testLinearizable(t, h) })
	t.Run("Resend", func(t *testing.T) { testResend(t, h) })
	optional("SettleQueue", "reserve", testSettleQueue)
	optional("Freed", "dequeue", testFreed)
	optional("Usage", "usage", testUsage)
}

// env is one test's store plus helpers that fail the test on error.
type env struct {
	t   *testing.T
	h   Harness
	s   fullStore
	ctx context.Context
	ids int
	// caps lists the optional operations s implements.
	caps capabilities
}

func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	s := h.NewStore(t)
	if s == nil {
		t.Fatal("storetest: Harness.NewStore returned nil")
	}
	return &env{t: t, h: h, s: checked(s), ctx: context.Background(), caps: capabilitiesOf(s)}
}

// id returns a fresh, deterministic lease id.
func (e *env) id() store.LeaseID {
	e.ids++
	return idFor(fmt.Sprintf("%s/%d", e.t.Name(), e.ids))
}

// idFor derives a version 4 UUID from a label, so vectors and tests are
// deterministic.
func idFor(label string) store.LeaseID {
	var id store.LeaseID
	h := uint64(14695981039346656037) // FNV-1a, mixing in the byte index each round
	for i := range id {
		for j := 0; j < len(label); j++ {
			h ^= uint64(label[j])
			h *= 1099511628211
		}
		h ^= uint64(i)
		h *= 1099511628211
		id[i] = byte(h >> 32)
	}
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

func (e *env) put(ms int64, b store.Bucket) {
	e.t.Helper()
	if err := e.s.PutBucket(e.ctx, store.PutBucketRequest{Now: At(ms), Bucket: b}); err != nil {
		e.t.Fatalf("PutBucket(%q): %v", b.Name, err)
	}
}

// req builds an acquisition at ms with a fresh id and a 60 s TTL.
func (e *env) req(ms int64, items ...store.Item) *store.AcquireRequest {
	return &store.AcquireRequest{Now: At(ms), Items: items, ID: e.id(), Caller: "storetest", TTL: time.Minute}
}

// acquire runs req and fails the test on error.
func (e *env) acquire(req *store.AcquireRequest) store.AcquireResult {
	e.t.Helper()
	var res store.AcquireResult
	if err := e.s.Acquire(e.ctx, req, &res); err != nil {
		e.t.Fatalf("Acquire(%v at %s): %v", req.Items, req.Now.Format(time.RFC3339Nano), err)
	}
	return res
}

// grant acquires and fails the test unless granted.
func (e *env) grant(req *store.AcquireRequest) store.AcquireResult {
	e.t.Helper()
	res := e.acquire(req)
	if !res.Granted {
		e.t.Fatalf("Acquire(%v at %s): denied (retry in %s), want granted", req.Items, req.Now.Format(time.RFC3339Nano), res.RetryIn)
	}
	return res
}

// peek returns one bucket's state at ms.
func (e *env) peek(ms int64, name string) store.BucketState {
	e.t.Helper()
	st, err := e.s.Peek(e.ctx, store.PeekRequest{Now: At(ms), Dimensions: []string{name}})
	if err != nil {
		e.t.Fatalf("Peek(%q): %v", name, err)
	}
	if len(st) != 1 {
		e.t.Fatalf("Peek(%q) returned %d states, want 1", name, len(st))
	}
	return st[0]
}

// tokens returns a bucket's balance in millitokens at ms.
func (e *env) tokens(ms int64, name string) int64 {
	e.t.Helper()
	return e.peek(ms, name).Tokens
}

// wantTokens checks a bucket's balance at ms.
func (e *env) wantTokens(ms int64, name string, want int64) {
	e.t.Helper()
	if got := e.tokens(ms, name); got != want {
		e.t.Errorf("tokens(%q at +%dms) = %d millitokens, want %d", name, ms, got, want)
	}
}

// snapshot captures every bucket and lease at ms, to prove that a failed
// operation changed nothing.
type snapshot struct {
	Buckets []store.BucketState
	Leases  []store.LeaseRecord
}

func (e *env) snapshot(ms int64) snapshot {
	e.t.Helper()
	bs, err := e.s.ListBuckets(e.ctx, store.ListBucketsRequest{Now: At(ms)})
	if err != nil {
		e.t.Fatalf("ListBuckets: %v", err)
	}
	ls, err := e.s.Leases(e.ctx, store.LeaseQuery{Now: At(ms)})
	if err != nil {
		e.t.Fatalf("Leases: %v", err)
	}
	for i := range bs { // normalise time zones for comparison
		bs[i].Now = bs[i].Now.UTC()
		bs[i].NextExpiry = bs[i].NextExpiry.UTC()
	}
	for i := range ls {
		ls[i].CreatedAt, ls[i].ExpiresAt = ls[i].CreatedAt.UTC(), ls[i].ExpiresAt.UTC()
	}
	return snapshot{bs, ls}
}

// unchanged fails the test if the store's state at ms differs from before.
func (e *env) unchanged(ms int64, before snapshot, what string) {
	e.t.Helper()
	if after := e.snapshot(ms); !reflect.DeepEqual(before, after) {
		e.t.Errorf("%s changed the store:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// wantErr checks that err matches target and, when non-empty, that its
// message mentions every string in mention.
func wantErr(t *testing.T, what string, err, target error, mention ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error = %v, want one matching %v", what, err, target)
		return
	}
	for _, m := range mention {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("%s: error %q does not mention %q", what, err, m)
		}
	}
}

// twoDims returns the names of two dimensions of kind metric that a test
// acquires together (see dims).
func (e *env) twoDims(metric string) (string, string) {
	d := e.dims(metric, "a", "b")
	return d[0], d[1]
}

// dims returns the names of dimensions of kind metric that a test acquires
// together, one per label, in the labels' sort order: of one vendor per
// label ("a#metric", "b#metric"), or, when the store takes only
// single-vendor acquisitions, of the one vendor "one" ("one#a-metric",
// "one#b-metric").
func (e *env) dims(metric string, labels ...string) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		if e.h.SingleVendorAcquire {
			out[i] = "one#" + l + "-" + metric
		} else {
			out[i] = l + "#" + metric
		}
	}
	return out
}

// vendor returns a dimension's vendor: its name up to the first '#'.
func vendor(dim string) string {
	v, _, _ := strings.Cut(dim, "#")
	return v
}

// Bucket constructors used throughout the suite.

func perMinute(name string, t bucket.LimitType, n int64) store.Bucket {
	return store.Bucket{Name: name, Config: bucket.PerPeriod(t, n, time.Minute)}
}

func rpm(name string, n int64) store.Bucket { return perMinute(name, bucket.Requests, n) }
func tpm(name string, n int64) store.Bucket { return perMinute(name, bucket.Tokens, n) }
func slots(name string, n int64) store.Bucket {
	return store.Bucket{Name: name, Config: bucket.ConcurrentSlots(n)}
}

func item(dim string, cost int64) store.Item { return store.Item{Dimension: dim, Cost: cost} }

func ms(d time.Duration) int64 { return d.Milliseconds() }

// names returns the dimensions of bucket states, in order.
func names(bs []store.BucketState) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Name
	}
	return out
}
