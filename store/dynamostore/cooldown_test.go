package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// diffRun drives the same random operations on a DynamoDB store (through
// two handles, as two processes would) and on the memory store, whose
// arithmetic is the Go bucket math, and fails on the first answer that
// differs.
type diffRun struct {
	t      *testing.T
	ctx    context.Context
	rng    *rand.Rand
	ddb    [2]*Store
	mem    *memstore.Store
	now    time.Time // the fleet's clock; a step may read it a little behind
	step   int
	tpmCfg [2]bucket.Config
}

var diffBuckets = []store.Bucket{
	{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)},
	{Name: "v#tpm", Config: bucket.Config{Type: bucket.Tokens, Capacity: 1000, RefillAmount: 700, RefillPeriod: 7 * time.Second, MaxDebt: 300}},
}

// TestCooldownMatchesMemstore runs random sequences of cooldowns, syncs,
// acquisitions, settlements, penalties, reconfigurations and reads, with
// callers slightly or far behind the fleet's clock, and checks that
// DynamoDB answers each exactly as the memory store does: the cooldown's
// end (cooldown_until_ms) must survive, and be honoured by, every
// operation that writes a bucket's state, on both acquisition paths.
func TestCooldownMatchesMemstore(t *testing.T) {
	for _, readFirst := range []bool{false, true} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("readFirst=%t/seed=%d", readFirst, seed), func(t *testing.T) {
				var opts []Option
				if readFirst {
					opts = append(opts, WithReadThenTransact())
				}
				db := newClient()
				table := newTable(t, db)
				r := &diffRun{t: t, ctx: context.Background(), rng: rand.New(rand.NewPCG(seed, 7)),
					mem: memstore.New(), now: t0}
				r.ddb[0] = openStore(t, db, table, opts...)
				r.ddb[1] = openStore(t, newClient(), table, opts...)
				t.Cleanup(func() { r.mem.Close() })
				r.tpmCfg = [2]bucket.Config{diffBuckets[1].Config,
					{Type: bucket.Tokens, Capacity: 600, RefillAmount: 600, RefillPeriod: 3 * time.Second}}
				for _, b := range diffBuckets {
					r.putBucket(b, false)
				}
				for r.step = 0; r.step < 120; r.step++ {
					r.now = r.now.Add(time.Duration(r.rng.IntN(1500)) * time.Millisecond)
					r.randomOp()
					if t.Failed() {
						return
					}
				}
			})
		}
	}
}

// at is the time a step's caller reads: usually the fleet's clock,
// sometimes behind it by less than the maximum skew, rarely by more.
func (r *diffRun) at() time.Time {
	switch x := r.rng.IntN(20); {
	case x < 3:
		return r.now.Add(-time.Duration(1+r.rng.IntN(900)) * time.Millisecond)
	case x == 3:
		return r.now.Add(-time.Duration(2000+r.rng.IntN(3000)) * time.Millisecond)
	}
	return r.now
}

func (r *diffRun) handle() *Store { return r.ddb[r.rng.IntN(2)] }

func (r *diffRun) dim() string { return diffBuckets[r.rng.IntN(2)].Name }

// same fails the test when the two stores' answers differ.
func (r *diffRun) same(op string, got, want any, gerr, werr error) {
	r.t.Helper()
	if (gerr == nil) != (werr == nil) || fmt.Sprint(got) != fmt.Sprint(want) {
		r.t.Errorf("step %d, %s:\n dynamodb %+v, %v\n memory   %+v, %v", r.step, op, got, gerr, want, werr)
	}
}

func (r *diffRun) randomOp() {
	now, dim := r.at(), r.dim()
	switch x := r.rng.IntN(100); {
	case x < 20:
		req := store.CooldownRequest{Now: now, Dimension: dim, Until: now.Add(time.Duration(1+r.rng.IntN(8000)) * time.Millisecond)}
		got, gerr := r.handle().Cooldown(r.ctx, req)
		want, werr := r.mem.Cooldown(r.ctx, req)
		r.same(fmt.Sprintf("Cooldown(%s, %v)", dim, req.Until.Sub(req.Now)), got, want, gerr, werr)
	case x < 35:
		req := store.SyncRequest{Now: now, Dimension: dim, Remaining: r.rng.Int64N(1200)}
		if dim == "v#rpm" {
			req.Remaining = r.rng.Int64N(12)
		}
		got, gerr := r.handle().Sync(r.ctx, req)
		want, werr := r.mem.Sync(r.ctx, req)
		r.same(fmt.Sprintf("Sync(%s, %d)", dim, req.Remaining), got, want, gerr, werr)
	case x < 65:
		r.acquire(now)
	case x < 75:
		delta := r.rng.Int64N(400) - 200
		if dim == "v#rpm" {
			delta = r.rng.Int64N(6) - 3
		}
		if delta == 0 {
			delta = 1
		}
		req := store.AdjustRequest{Now: now, ID: store.NewLeaseID(), Dimension: dim, Delta: delta, Held: 1000, ExpiresAt: now.Add(time.Minute)}
		got, gerr := r.handle().Adjust(r.ctx, req)
		want, werr := r.mem.Adjust(r.ctx, req)
		r.same(fmt.Sprintf("Adjust(%s, %d)", dim, delta), got, want, gerr, werr)
	case x < 80:
		req := store.PenalizeRequest{Now: now, Dimension: dim, FactorMilli: r.rng.Int64N(1001)}
		got, gerr := r.handle().Penalize(r.ctx, req)
		want, werr := r.mem.Penalize(r.ctx, req)
		r.same("Penalize", got, want, gerr, werr)
	case x < 85:
		b := store.Bucket{Name: "v#tpm", Config: r.tpmCfg[r.rng.IntN(2)]}
		r.putBucketAt(now, b, r.rng.IntN(3) == 0)
	default:
		r.peek(now)
	}
}

func (r *diffRun) acquire(now time.Time) {
	var items []store.Item
	switch r.rng.IntN(3) {
	case 0:
		items = []store.Item{{Dimension: "v#rpm", Cost: 1 + r.rng.Int64N(3)}}
	case 1:
		items = []store.Item{{Dimension: "v#tpm", Cost: 1 + r.rng.Int64N(500)}}
	default:
		items = []store.Item{{Dimension: "v#tpm", Cost: 1 + r.rng.Int64N(300)}, {Dimension: "v#rpm", Cost: 1}}
	}
	req := store.AcquireRequest{Now: now, Items: items, ID: store.NewLeaseID(), Caller: "diff", TTL: time.Minute, Record: r.rng.IntN(4) == 0}
	req2 := req
	var got, want store.AcquireResult
	gerr := r.handle().Acquire(r.ctx, &req, &got)
	werr := r.mem.Acquire(r.ctx, &req2, &want)
	// Recorded differs by design on the read-then-transact path, which
	// always writes a lease record.
	got.Recorded, want.Recorded = false, false
	r.same(fmt.Sprintf("Acquire(%v)", items), got, want, gerr, werr)
}

func (r *diffRun) peek(now time.Time) {
	req := store.PeekRequest{Now: now, Dimensions: []string{"v#rpm", "v#tpm"}}
	got, gerr := r.handle().Peek(r.ctx, req)
	want, werr := r.mem.Peek(r.ctx, req)
	r.same("Peek", states(got), states(want), gerr, werr)
	gl, gerr := r.handle().ListBuckets(r.ctx, store.ListBucketsRequest{Now: now})
	wl, werr := r.mem.ListBuckets(r.ctx, store.ListBucketsRequest{Now: now})
	sortStates(gl)
	sortStates(wl)
	r.same("ListBuckets", states(gl), states(wl), gerr, werr)
}

// states keeps what both stores must agree on (lease counts differ by
// design on the read-then-transact path).
func states(bs []store.BucketState) []store.BucketState {
	out := make([]store.BucketState, len(bs))
	for i, b := range bs {
		out[i] = store.BucketState{Bucket: b.Bucket, Tokens: b.Tokens, LastRefill: b.LastRefill, CooldownUntil: b.CooldownUntil, Now: b.Now}
	}
	return out
}

func sortStates(bs []store.BucketState) {
	for i := range bs {
		for j := i + 1; j < len(bs); j++ {
			if bs[j].Name < bs[i].Name {
				bs[i], bs[j] = bs[j], bs[i]
			}
		}
	}
}

func (r *diffRun) putBucket(b store.Bucket, reset bool) { r.putBucketAt(r.now, b, reset) }

func (r *diffRun) putBucketAt(now time.Time, b store.Bucket, reset bool) {
	req := store.PutBucketRequest{Now: now, Bucket: b, Reset: reset}
	gerr := r.handle().PutBucket(r.ctx, req)
	werr := r.mem.PutBucket(r.ctx, req)
	r.same(fmt.Sprintf("PutBucket(%+v, reset %t)", b.Config, reset), nil, nil, gerr, werr)
}

// rawRow reads a bucket row as stored.
func rawRow(t *testing.T, s *Store, name string) map[string]types.AttributeValue {
	t.Helper()
	out, err := s.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key(name), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// untilAttr returns the row's cooldown_until_ms, or "" without one.
func untilAttr(t *testing.T, s *Store, name string) string {
	t.Helper()
	v, _ := getN(rawRow(t, s, name), attrUntil)
	return v
}

// TestCooldownRow checks the row layout: cooldown_until_ms is written by
// a cooldown as the decision time plus the cooldown's length, is kept by
// a reconfiguration, removed by a reset, absent from a bucket that never
// had a cooldown, and shown by Peek and ListBuckets.
func TestCooldownRow(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	rpm := store.Bucket{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)}
	put(t, s, t0, rpm)
	if got := untilAttr(t, s, "v#rpm"); got != "" {
		t.Fatalf("a new bucket has cooldown_until_ms %q", got)
	}
	if _, err := s.Sync(ctx, store.SyncRequest{Now: t0, Dimension: "v#rpm", Remaining: 4}); err != nil {
		t.Fatal(err)
	}
	if got := untilAttr(t, s, "v#rpm"); got != "" {
		t.Fatalf("a sync wrote cooldown_until_ms %q", got)
	}
	// A caller 300 ms behind the row's last write decides at that write's
	// time: the cooldown lasts 5 s from t0.
	res, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0.Add(-300 * time.Millisecond), Dimension: "v#rpm", Until: t0.Add(4700 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	end := t0.UnixMilli() + 5000
	if want := (store.CooldownResult{Before: 4000, After: 0, Until: end}); res != want {
		t.Errorf("Cooldown = %+v, want %+v", res, want)
	}
	if got, want := untilAttr(t, s, "v#rpm"), fmt.Sprint(end); got != want {
		t.Errorf("cooldown_until_ms = %q, want %q", got, want)
	}
	// A shorter cooldown keeps the running one.
	if res, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0.Add(time.Second), Dimension: "v#rpm", Until: t0.Add(2 * time.Second)}); err != nil || res.Until != end {
		t.Errorf("a shorter cooldown = %+v, %v; want Until %d", res, err, end)
	}
	peekUntil := func(now time.Time) int64 {
		t.Helper()
		st, err := s.Peek(ctx, store.PeekRequest{Now: now, Dimensions: []string{"v#rpm"}})
		if err != nil {
			t.Fatal(err)
		}
		ls, err := s.ListBuckets(ctx, store.ListBucketsRequest{Now: now})
		if err != nil || len(ls) != 1 || ls[0].CooldownUntil != st[0].CooldownUntil {
			t.Fatalf("ListBuckets = %+v, %v; Peek = %+v", ls, err, st)
		}
		return st[0].CooldownUntil
	}
	if got := peekUntil(t0.Add(time.Minute)); got != end {
		t.Errorf("Peek after the cooldown: CooldownUntil %d, want %d (the last cooldown is kept)", got, end)
	}
	rpm.Capacity, rpm.RefillAmount = 20, 20
	put(t, s, t0.Add(2*time.Second), rpm)
	if got := peekUntil(t0.Add(2 * time.Second)); got != end {
		t.Errorf("after a reconfiguration: CooldownUntil %d, want %d", got, end)
	}
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: t0.Add(3 * time.Second), Bucket: rpm, Reset: true}); err != nil {
		t.Fatal(err)
	}
	if got := untilAttr(t, s, "v#rpm"); got != "" {
		t.Errorf("a reset left cooldown_until_ms %q", got)
	}
	if got := peekUntil(t0.Add(3 * time.Second)); got != 0 {
		t.Errorf("after a reset: CooldownUntil %d, want 0", got)
	}
}

// TestCooldownErrors checks the refusals: a concurrent bucket (the
// CheckCoolable error, even when this process remembers the row as time-based),
// an unknown dimension (*store.ConfigurationError).
func TestCooldownErrors(t *testing.T) {
	s := newStore(t)
	other := openHandle(t, s)
	ctx := context.Background()
	put(t, s, t0, store.Bucket{Name: "v#concurrent", Config: bucket.ConcurrentSlots(2)})
	put(t, s, t0, store.Bucket{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	acquireOnce(t, s, t0, false, store.Item{Dimension: "v#rpm"}) // remembers the row
	// Another process re-creates v#rpm as a concurrent bucket.
	if err := other.DeleteBucket(ctx, store.DeleteBucketRequest{Name: "v#rpm"}); err != nil {
		t.Fatal(err)
	}
	put(t, other, t0, store.Bucket{Name: "v#rpm", Config: bucket.ConcurrentSlots(3)})
	for _, dim := range []string{"v#concurrent", "v#rpm"} {
		_, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: dim, Until: t0.Add(time.Second)})
		if !errors.Is(err, bucket.ErrInvalid) {
			t.Errorf("Cooldown on concurrent %s: %v, want ErrInvalid", dim, err)
		}
		_, err = s.Sync(ctx, store.SyncRequest{Now: t0, Dimension: dim, Remaining: 1})
		if !errors.Is(err, bucket.ErrInvalid) {
			t.Errorf("Sync on concurrent %s: %v, want ErrInvalid", dim, err)
		}
	}
	var ce *store.ConfigurationError
	if _, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: "v#none", Until: t0.Add(time.Second)}); !errors.As(err, &ce) {
		t.Errorf("Cooldown on an unknown dimension: %v, want a *store.ConfigurationError", err)
	}
	if _, err := s.Sync(ctx, store.SyncRequest{Now: t0, Dimension: "v#none"}); !errors.As(err, &ce) {
		t.Errorf("Sync on an unknown dimension: %v, want a *store.ConfigurationError", err)
	}
	s.Close()
	if _, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: "v#rpm", Until: t0.Add(time.Second)}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Cooldown after Close: %v, want ErrClosed", err)
	}
}

// TestCooldownRoundTrips counts requests: a cooldown or a sync on a row
// this process remembers is one UpdateItem; on a cold one, a read first;
// on a stale one, the failed condition returns the row and the retry
// needs no read.
func TestCooldownRoundTrips(t *testing.T) {
	tp := newTap()
	db := tp.client()
	table := newTable(t, db)
	s, other := openStore(t, db, table), openStore(t, db, table)
	ctx := context.Background()
	put(t, s, t0, store.Bucket{Name: "v#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)})
	count := func(name string, want map[string]int, f func() error) {
		t.Helper()
		tp.reset()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		ops, _, _ := tp.snapshot()
		if fmt.Sprint(ops) != fmt.Sprint(want) {
			t.Errorf("%s: requests %v, want %v", name, ops, want)
		}
	}
	sync := func(now time.Time, n int64) func() error {
		return func() error {
			_, err := s.Sync(ctx, store.SyncRequest{Now: now, Dimension: "v#tpm", Remaining: n})
			return err
		}
	}
	count("sync, cold", map[string]int{"GetItem": 1, "UpdateItem": 1}, sync(t0, 900))
	count("sync, warm", map[string]int{"UpdateItem": 1}, sync(t0, 800))
	count("cooldown, warm", map[string]int{"UpdateItem": 1}, func() error {
		_, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: "v#tpm", Until: t0.Add(time.Second)})
		return err
	})
	charge := store.AdjustRequest{Now: t0.Add(time.Second), ID: store.NewLeaseID(), Dimension: "v#tpm", Delta: 5, Held: 1, ExpiresAt: t0.Add(time.Minute)}
	if _, err := other.Adjust(ctx, charge); err != nil {
		t.Fatal(err)
	}
	count("sync, stale", map[string]int{"UpdateItem": 2}, sync(t0.Add(2*time.Second), 10))
	// A sync that changes nothing, decided on a fresh read, writes nothing.
	s.forget("v#tpm")
	count("sync, no change", map[string]int{"GetItem": 1}, sync(t0.Add(2*time.Second), 999))
}
