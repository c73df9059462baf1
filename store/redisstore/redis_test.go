package redisstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// countHook counts commands and pipelines sent to the server: each is one
// round trip.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

func acquire(t *testing.T, s store.Store, now time.Time, items ...store.Item) *store.AcquireResult {
	t.Helper()
	var res store.AcquireResult
	req := &store.AcquireRequest{Now: now, Items: items, ID: store.NewLeaseID(), TTL: time.Minute}
	if err := s.Acquire(context.Background(), req, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// TestOneRoundTrip counts round trips with a go-redis hook: exactly one per
// acquisition, for one dimension and for three with a lease record, once
// the script is cached (the first call may add an EVAL after NOSCRIPT).
func TestOneRoundTrip(t *testing.T) {
	c := newClient(t)
	s := newStoreOn(t, c)
	put(t, s, t0, store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 1000, time.Minute)})
	put(t, s, t0, store.Bucket{Name: "openai#tpm", Config: bucket.PerPeriod(bucket.Tokens, 100000, time.Minute)})
	put(t, s, t0, store.Bucket{Name: "openai#concurrent", Config: bucket.ConcurrentSlots(100)})
	acquire(t, s, t0, store.Item{Dimension: "openai#rpm"}) // loads the script
	h := &countHook{}
	c.AddHook(h)
	for i := range 10 {
		acquire(t, s, t0.Add(time.Duration(i)*time.Millisecond), store.Item{Dimension: "openai#rpm"})
	}
	if n := h.n.Load(); n != 10 {
		t.Errorf("10 one-dimension acquisitions took %d round trips, want 10", n)
	}
	h.n.Store(0)
	for i := range 10 {
		res := acquire(t, s, t0.Add(time.Duration(i)*time.Millisecond),
			store.Item{Dimension: "openai#rpm"}, store.Item{Dimension: "openai#tpm", Cost: 500}, store.Item{Dimension: "openai#concurrent"})
		if !res.Granted || !res.Recorded {
			t.Fatalf("3-dimension acquisition: %+v", res)
		}
	}
	if n := h.n.Load(); n != 10 {
		t.Errorf("10 three-dimension acquisitions with a lease took %d round trips, want 10", n)
	}
}

// TestKeyLayout pins the documented key names.
func TestKeyLayout(t *testing.T) {
	c := newClient(t)
	s, err := New(c, WithPrefix("layout:"), WithCallerClock())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Del(context.Background(), mustKeys(t, c, "layout:*")...) })
	put(t, s, t0, store.Bucket{Name: "openai#gpt-4o#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)})
	put(t, s, t0, store.Bucket{Name: "eleven#concurrent", Config: bucket.ConcurrentSlots(2)})
	put(t, s, t0, store.Bucket{Name: "#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	id, slotOp := store.NewLeaseID(), store.NewLeaseID()
	var res store.AcquireResult
	if err := s.Acquire(context.Background(), &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "eleven#concurrent"}}, ID: id, TTL: time.Minute, Op: slotOp}, &res); err != nil {
		t.Fatal(err)
	}
	op := store.NewLeaseID()
	if err := s.Acquire(context.Background(), &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute, Op: op}, &res); err != nil || !res.Granted {
		t.Fatalf("acquire: %+v, %v", res, err)
	}
	got := mustKeys(t, c, "layout:*")
	slices.Sort(got)
	want := []string{
		"layout:vendors", "layout:ids",
		"layout:{#}#rpm", "layout:{#}:buckets", "layout:{#}:gen", "layout:{#}:op:acquire:" + op.String(),
		"layout:{eleven}#concurrent", "layout:{eleven}:buckets", "layout:{eleven}:dz#concurrent", "layout:{eleven}:gen",
		"layout:{eleven}:lease:" + id.String(), "layout:{eleven}:leases", "layout:{eleven}:op:acquire:" + slotOp.String(),
		"layout:{openai}#gpt-4o#tpm", "layout:{openai}:buckets", "layout:{openai}:gen",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("keys:\n got %q\nwant %q", got, want)
	}
	if v, _ := c.HGet(context.Background(), "layout:{openai}#gpt-4o#tpm", "c").Result(); v != "1000000" {
		t.Errorf("capacity field %q, want the integer 1000000", v)
	}
}

func mustKeys(t *testing.T, c *redis.Client, pattern string) []string {
	t.Helper()
	k, err := c.Keys(context.Background(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestServerClock checks the default mode: Now is ignored (even an invalid
// one) and the server's TIME decides.
func TestServerClock(t *testing.T) {
	s, err := New(newClient(t), WithPrefix(uniquePrefix()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var zero time.Time // before the epoch: invalid for a caller clock
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: zero, Bucket: store.Bucket{Name: "svc#concurrent", Config: bucket.ConcurrentSlots(1)}}); err != nil {
		t.Fatal(err)
	}
	res := acquire(t, s, zero, store.Item{Dimension: "svc#concurrent"})
	if !res.Granted || res.ExpiresAt.Year() < 2020 {
		t.Fatalf("server-clock acquisition: %+v", res)
	}
	st, err := s.Peek(ctx, store.PeekRequest{Now: zero, Dimensions: []string{"svc#concurrent"}})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Now.Year() < 2020 || st[0].ActiveLeases != 1 || st[0].NextExpiry != res.ExpiresAt {
		t.Errorf("peek: %+v (lease expires %v)", st[0], res.ExpiresAt)
	}
	if ls, err := s.Leases(ctx, store.LeaseQuery{Now: zero}); err != nil || len(ls) != 1 || !ls[0].ExpiresAt.Equal(res.ExpiresAt) {
		t.Errorf("leases: %+v %v", ls, err)
	}
}

// TestClusterSlots runs per-vendor slots on the real Cluster: a
// cross-vendor acquisition fails with ErrCrossSlot before any command is
// sent, same-vendor ones work, and a lease recorded by one process is
// released, extended and reconciled by another that never saw it.
func TestClusterSlots(t *testing.T) {
	c := newClusterClient(t)
	s := newStoreOn(t, c)
	ctx := context.Background()
	for _, b := range []store.Bucket{
		{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)},
		{Name: "openai#concurrent", Config: bucket.ConcurrentSlots(2)},
		{Name: "anthropic#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)},
		{Name: "eleven#concurrent", Config: bucket.ConcurrentSlots(1)},
	} {
		put(t, s, t0, b)
	}
	if Slot("openai") == Slot("anthropic") {
		t.Fatal("test assumes openai and anthropic hash to different slots")
	}
	h := &countHook{}
	c.AddHook(h)
	var res store.AcquireResult
	err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, ID: store.NewLeaseID(), TTL: time.Minute,
		Items: []store.Item{{Dimension: "openai#rpm"}, {Dimension: "anthropic#rpm"}}}, &res)
	if !errors.Is(err, ErrCrossSlot) || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("cross-vendor acquisition on a Cluster: %v, want ErrCrossSlot", err)
	}
	if n := h.n.Load(); n != 0 {
		t.Errorf("the rejected acquisition sent %d commands", n)
	}
	r := acquire(t, s, t0, store.Item{Dimension: "openai#rpm"}, store.Item{Dimension: "openai#concurrent"})
	e := acquire(t, s, t0, store.Item{Dimension: "eleven#concurrent"})
	if !r.Granted || !e.Granted {
		t.Fatalf("same-vendor acquisitions: %+v %+v", r, e)
	}
	other := newStoreOn(t, c, WithPrefix(s.prefix)) // no lease cache
	ls, err := other.Leases(ctx, store.LeaseQuery{Now: t0})
	if err != nil || len(ls) != 2 {
		t.Fatalf("leases from another store: %v %v", ls, err)
	}
	var openaiLease store.LeaseID
	for _, l := range ls {
		if l.Items[0].Dimension == "openai#rpm" {
			openaiLease = l.ID
		}
	}
	if _, err := other.Extend(ctx, store.ExtendRequest{Now: t0.Add(time.Second), ID: openaiLease, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	rel, err := other.Release(ctx, store.ReleaseRequest{Now: t0, ID: openaiLease})
	if err != nil || !rel.Released || len(rel.Restored) != 1 || rel.Restored[0].Dimension != "openai#concurrent" {
		t.Fatalf("release from another store: %+v %v", rel, err)
	}
	rec, err := other.Reconcile(ctx, store.ReconcileRequest{Now: t0.Add(2 * time.Minute), Limit: store.DefaultReconcileLimit})
	if err != nil || rec.Restored != 1 || rec.Reclaimed != 1 || !slices.Equal(rec.Dimensions, []string{"eleven#concurrent"}) {
		t.Fatalf("reconcile on the Cluster: %+v %v", rec, err)
	}
	st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"openai#concurrent", "anthropic#rpm", "eleven#concurrent"}})
	if err != nil || st[0].Tokens != 2000 || st[1].Tokens != 10000 || st[2].Tokens != 1000 {
		t.Fatalf("peek across slots: %+v %v", st, err)
	}
}

// TestScriptFlush: after SCRIPT FLUSH the scripts reload transparently.
func TestScriptFlush(t *testing.T) {
	c := newClient(t)
	s := newStoreOn(t, c)
	put(t, s, t0, store.Bucket{Name: "f#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	acquire(t, s, t0, store.Item{Dimension: "f#rpm"})
	if err := c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if res := acquire(t, s, t0, store.Item{Dimension: "f#rpm"}); !res.Granted || res.Items[0].Remaining != 8000 {
		t.Fatalf("after SCRIPT FLUSH: %+v", res)
	}
}

// TestScriptFlushCluster: the acquire path's own EVALSHA-then-EVAL fallback
// works through a Cluster client too.
func TestScriptFlushCluster(t *testing.T) {
	c := newClusterClient(t)
	s := newStoreOn(t, c)
	ctx := context.Background()
	put(t, s, t0, store.Bucket{Name: "f#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	acquire(t, s, t0, store.Item{Dimension: "f#rpm"})
	if err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	if res := acquire(t, s, t0, store.Item{Dimension: "f#rpm"}); !res.Granted || res.Items[0].Remaining != 8000 {
		t.Fatalf("after SCRIPT FLUSH: %+v", res)
	}
}

// TestHintedReleaseFromAnotherProcess: a store instance that did not grant
// the lease (another process) releases it in one round trip when the
// request carries the lease's dimension as a hint.
func TestHintedReleaseFromAnotherProcess(t *testing.T) {
	c := newClient(t)
	prefix := uniquePrefix()
	open := func() *Store {
		s, err := New(c, WithPrefix(prefix), WithCallerClock())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a := open()
	put(t, a, t0, store.Bucket{Name: "zeta#concurrent", Config: bucket.ConcurrentSlots(3)})
	put(t, a, t0, store.Bucket{Name: "alpha#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	id := store.NewLeaseID()
	var res store.AcquireResult
	req := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "zeta#concurrent"}}, ID: id, TTL: time.Minute}
	if err := a.Acquire(context.Background(), req, &res); err != nil || !res.Recorded {
		t.Fatalf("concurrent acquisition = %+v, %v", res, err)
	}
	b := open() // empty lease cache, as in another process
	// Load the release script first so the count is of the release alone.
	if _, err := b.Release(context.Background(), store.ReleaseRequest{Now: t0, ID: store.NewLeaseID(), Hint: "zeta#concurrent"}); err != nil {
		t.Fatal(err)
	}
	h := &countHook{}
	c.AddHook(h)
	rr, err := b.Release(context.Background(), store.ReleaseRequest{Now: t0, ID: id, Hint: "zeta#concurrent"})
	if err != nil || !rr.Released || len(rr.Restored) != 1 {
		t.Fatalf("hinted release = %+v, %v; want released with one restore", rr, err)
	}
	if n := h.n.Load(); n != 1 {
		t.Errorf("hinted release from another process took %d round trips, want 1", n)
	}
}

// TestReconcileChunks: a batch larger than one script call's chunk is
// worked through in several calls, and the limit still bounds the batch.
func TestReconcileChunks(t *testing.T) {
	s := newStoreOn(t, newClient(t))
	put(t, s, t0, store.Bucket{Name: "chunk#concurrent", Config: bucket.ConcurrentSlots(2000)})
	const n = 2*reconcileChunk + 100
	for range n {
		req := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "chunk#concurrent", Cost: 1}}, ID: store.NewLeaseID(), TTL: time.Second}
		var res store.AcquireResult
		if err := s.Acquire(context.Background(), req, &res); err != nil || !res.Granted {
			t.Fatalf("acquire: %+v %v", res, err)
		}
	}
	later := t0.Add(2 * time.Second)
	got, err := s.Reconcile(context.Background(), store.ReconcileRequest{Now: later, Limit: 2*reconcileChunk + 50})
	if err != nil || got.Restored != 2*reconcileChunk+50 || got.Reclaimed != got.Restored || !got.More {
		t.Fatalf("first batch = %+v, %v; want %d restored and more", got, err, 2*reconcileChunk+50)
	}
	got, err = s.Reconcile(context.Background(), store.ReconcileRequest{Now: later, Limit: n})
	if err != nil || got.Restored != 50 || got.More {
		t.Fatalf("second batch = %+v, %v; want the last 50 and no more", got, err)
	}
	st, err := s.Peek(context.Background(), store.PeekRequest{Now: later, Dimensions: []string{"chunk#concurrent"}})
	if err != nil || st[0].Tokens != 2000*1000 || st[0].ActiveLeases != 0 {
		t.Fatalf("after reconcile: %+v %v; want full and no leases", st, err)
	}
}

// TestReplayedRecordedAcquire: go-redis retries a command whose reply was
// lost; a recorded acquisition that already ran must then be answered as
// granted again, not debited twice and not refused.
func TestReplayedRecordedAcquire(t *testing.T) {
	s := newStoreOn(t, newClient(t))
	put(t, s, t0, store.Bucket{Name: "replay#concurrent", Config: bucket.ConcurrentSlots(2)})
	req := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "replay#concurrent", Cost: 1}}, ID: store.NewLeaseID(), TTL: time.Minute}
	for i := range 2 {
		var res store.AcquireResult
		if err := s.Acquire(context.Background(), req, &res); err != nil || !res.Granted || !res.Recorded || !res.ExpiresAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("run %d: %+v %v; want granted and recorded, expiring at +1m", i+1, res, err)
		}
		if got := res.Items[0].Remaining; got != 1000 {
			t.Errorf("run %d: remaining %d, want 1000 (one slot taken once)", i+1, got)
		}
	}
	st, err := s.Peek(context.Background(), store.PeekRequest{Now: t0, Dimensions: []string{"replay#concurrent"}})
	if err != nil || st[0].Tokens != 1000 || st[0].ActiveLeases != 1 {
		t.Fatalf("after a replay: %+v %v; want one slot taken, one lease", st, err)
	}
}

// TestLeaseIDReuse: an acquisition under the id of a lease record is a
// retry only when it names the same items at the same resolved costs (in
// any order); any other reuse, whatever dimensions or vendor it names,
// fails with ErrLeaseInUse and changes nothing. Once the lease is released
// the id is free again (and the live-id hash forgets it).
func TestLeaseIDReuse(t *testing.T) {
	c := newClient(t)
	s := newStoreOn(t, c)
	ctx := context.Background()
	for _, b := range []store.Bucket{
		{Name: "ra#concurrent", Config: bucket.ConcurrentSlots(5)},
		{Name: "ra#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)},
		{Name: "ra#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)},
		{Name: "rb#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)},
	} {
		put(t, s, t0, b)
	}
	id := store.NewLeaseID()
	first := []store.Item{{Dimension: "ra#concurrent"}, {Dimension: "ra#tpm", Cost: 100}}
	var res store.AcquireResult
	if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: first, ID: id, TTL: time.Minute}, &res); err != nil || !res.Granted {
		t.Fatalf("first acquisition: %+v %v", res, err)
	}
	before, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"ra#concurrent", "ra#rpm", "ra#tpm", "rb#rpm"}})
	if err != nil {
		t.Fatal(err)
	}
	other := newStoreOn(t, c, WithPrefix(s.prefix)) // another process: no lease cache
	for _, tc := range []struct {
		name  string
		items []store.Item
	}{
		{"another dimension of the vendor", []store.Item{{Dimension: "ra#rpm"}}},
		{"a subset", []store.Item{{Dimension: "ra#concurrent"}}},
		{"another cost", []store.Item{{Dimension: "ra#concurrent"}, {Dimension: "ra#tpm", Cost: 101}}},
		{"a superset", []store.Item{{Dimension: "ra#concurrent"}, {Dimension: "ra#tpm", Cost: 100}, {Dimension: "ra#rpm"}}},
		{"another vendor", []store.Item{{Dimension: "rb#rpm"}}},
		{"another vendor first", []store.Item{{Dimension: "rb#rpm"}, {Dimension: "ra#concurrent"}}},
	} {
		for _, st := range []*Store{s, other} {
			for _, record := range []bool{false, true} {
				var got store.AcquireResult
				err := st.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: tc.items, ID: id, TTL: time.Minute, Record: record}, &got)
				if !errors.Is(err, store.ErrLeaseInUse) {
					t.Errorf("%s (record %v): %+v %v, want ErrLeaseInUse", tc.name, record, got, err)
				}
			}
		}
	}
	// The same items in another order, from another process, a second
	// later: the grant it was, changing nothing, with the balances of now
	// (ra#tpm refilled 1000 tokens/min × 1s = 16666 millitokens).
	var again store.AcquireResult
	retry := []store.Item{{Dimension: "ra#tpm", Cost: 100}, {Dimension: "ra#concurrent", Cost: 1}}
	if err := other.Acquire(ctx, &store.AcquireRequest{Now: t0.Add(time.Second), Items: retry, ID: id, TTL: time.Hour}, &again); err != nil {
		t.Fatal(err)
	}
	if !again.Granted || !again.Recorded || !again.ExpiresAt.Equal(res.ExpiresAt) || again.Items[0].Dimension != "ra#tpm" ||
		again.Items[0].Remaining != before[2].Tokens+16666 || again.Items[1].Remaining != before[0].Tokens {
		t.Errorf("retry: %+v, want the grant expiring at %v with the balances of now", again, res.ExpiresAt)
	}
	after, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"ra#concurrent", "ra#rpm", "ra#tpm", "rb#rpm"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after, before) {
		t.Errorf("reuse changed the buckets:\n got %+v\nwant %+v", after, before)
	}
	if rel, err := other.Release(ctx, store.ReleaseRequest{Now: t0, ID: id}); err != nil || !rel.Released {
		t.Fatalf("release: %+v %v", rel, err)
	}
	if n, err := c.HLen(ctx, s.prefix+"ids").Result(); err != nil || n != 0 {
		t.Errorf("live ids after the release: %d %v, want 0", n, err)
	}
	if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "rb#rpm"}}, ID: id, TTL: time.Minute}, &res); err != nil || !res.Granted {
		t.Errorf("the id once released: %+v %v, want a fresh grant", res, err)
	}
}

// TestBadOptions: each bad option value is a configuration error matching
// ErrInvalid (never ErrUnavailable) that names the value.
func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Option
		want string
	}{
		{"negative timeout", WithTimeout(-time.Second), "-1s"},
		{"zero max skew", WithMaxSkew(0), "0s"},
		{"max skew above 1h", WithMaxSkew(2 * time.Hour), "2h0m0s"},
		{"negative replica count", WithReplicaAck(-1, time.Second), "-1"},
		{"replica ack without a timeout", WithReplicaAck(1, 0), "0s"},
		{"negative batch", WithBatching(-2), "-2"},
		{"prefix with braces", WithPrefix("a{b}"), "a{b}"},
		{"op window below 1s", WithOpWindow(500 * time.Millisecond), "500ms"},
		{"op window within the timeout", WithOpWindow(2 * time.Second), "2s"},
	} {
		_, err := New(newClient(t), tc.opt)
		if !errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid naming %q", tc.name, err, tc.want)
		}
	}
}

// TestVendorPruned: on a standalone server a vendor whose last bucket is
// deleted and whose last lease record is released or reconciled leaves the
// registry, so listings and reconcile do not walk it; putting a bucket
// registers it again, atomically with the bucket.
func TestVendorPruned(t *testing.T) {
	c := newClient(t)
	s := newStoreOn(t, c)
	ctx := context.Background()
	vendors := func() []string {
		t.Helper()
		v, err := c.SMembers(ctx, s.registry()).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(v)
		return v
	}
	put(t, s, t0, store.Bucket{Name: "pr#concurrent", Config: bucket.ConcurrentSlots(2)})
	put(t, s, t0, store.Bucket{Name: "keep#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	held := acquire(t, s, t0, store.Item{Dimension: "pr#concurrent"})
	gone := acquire(t, s, t0, store.Item{Dimension: "pr#concurrent"})
	if err := s.DeleteBucket(ctx, store.DeleteBucketRequest{Name: "pr#concurrent"}); err != nil {
		t.Fatal(err)
	}
	if got := vendors(); !slices.Equal(got, []string{"keep", "pr"}) {
		t.Fatalf("with lease records left: vendors %q", got)
	}
	var ids []store.LeaseID
	ls, err := s.Leases(ctx, store.LeaseQuery{Now: t0})
	if err != nil || len(ls) != 2 || !held.Recorded || !gone.Recorded {
		t.Fatalf("leases %+v %v", ls, err)
	}
	for _, l := range ls {
		ids = append(ids, l.ID)
	}
	if _, err := s.Release(ctx, store.ReleaseRequest{Now: t0, ID: ids[0]}); err != nil {
		t.Fatal(err)
	}
	if got := vendors(); !slices.Equal(got, []string{"keep", "pr"}) {
		t.Fatalf("with one lease record left: vendors %q", got)
	}
	if r, err := s.Reconcile(ctx, store.ReconcileRequest{Now: t0.Add(2 * time.Minute), Limit: store.DefaultReconcileLimit}); err != nil || r.Orphans != 1 {
		t.Fatalf("reconcile: %+v %v", r, err)
	}
	if got := vendors(); !slices.Equal(got, []string{"keep"}) {
		t.Fatalf("after the last record: vendors %q, want only keep", got)
	}
	put(t, s, t0, store.Bucket{Name: "pr#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	if got := vendors(); !slices.Equal(got, []string{"keep", "pr"}) {
		t.Fatalf("after a new bucket: vendors %q", got)
	}
	put(t, s, t0, store.Bucket{Name: "solo#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	if err := s.DeleteBucket(ctx, store.DeleteBucketRequest{Name: "solo#rpm"}); err != nil {
		t.Fatal(err)
	}
	if got := vendors(); !slices.Equal(got, []string{"keep", "pr"}) {
		t.Fatalf("after deleting a vendor's only bucket: vendors %q", got)
	}
	if bs, err := s.ListBuckets(ctx, store.ListBucketsRequest{Now: t0}); err != nil || len(bs) != 2 {
		t.Fatalf("list: %+v %v", bs, err)
	}
}
