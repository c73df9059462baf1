package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// fullStore is the whole contract, optional operations included, which
// both stores of a pair implement.
type fullStore interface {
	store.Queuer
	store.Cooler
	store.Syncer
}

// pair runs every operation on the Redis store and on the memory store, whose
// Go bucket math is the reference, and fails the test when their answers
// differ.
type pair struct {
	t       *testing.T
	r, m    fullStore
	now     time.Time
	step    int
	history []string
}

func (p *pair) fail(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("step %d at %d: %s\nhistory:\n%s", p.step, p.now.UnixMilli(), fmt.Sprintf(format, args...), p.trace())
}

func (p *pair) trace() string {
	out := ""
	for _, h := range p.history[max(0, len(p.history)-12):] {
		out += "  " + h + "\n"
	}
	return out
}

// same compares the two stores' results and errors.
func (p *pair) same(op string, r, m any, rerr, merr error) {
	p.t.Helper()
	p.history = append(p.history, fmt.Sprintf("%d %s → %+v %v", p.now.UnixMilli(), op, m, merr))
	if (rerr == nil) != (merr == nil) || (rerr != nil && rerr.Error() != merr.Error()) {
		p.fail("%s: redis error %v, memory error %v", op, rerr, merr)
	}
	if rerr == nil && !reflect.DeepEqual(r, m) {
		p.fail("%s: redis %+v\nmemory %+v", op, r, m)
	}
}

// TestCooldownMatchesMemory runs random sequences of cooldowns, syncs,
// acquisitions, settlements, penalties, reconfigurations and peeks, with a
// clock that jumps forwards and sometimes back (within and beyond the
// maximum skew), on the Redis store and the memory store, and requires the
// same answers and the same states (balance, refill time and cooldown end)
// at every step.
func TestCooldownMatchesMemory(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runCooldownPair(t, seed, 250)
		})
	}
}

func runCooldownPair(t *testing.T, seed uint64, steps int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 77))
	p := &pair{t: t, r: newStore(t), m: memstore.New(), now: t0}
	buckets := []store.Bucket{
		{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)},
		{Name: "v#tpm", Config: bucket.Config{Type: bucket.Tokens, Capacity: 5000, RefillAmount: 5000,
			RefillPeriod: time.Minute, MaxDebt: 2000}},
		{Name: "v#odd", Config: bucket.Config{Type: bucket.Tokens, Capacity: 7, RefillAmount: 3, RefillPeriod: 1001 * time.Millisecond}},
		{Name: "v#conc", Config: bucket.ConcurrentSlots(3)},
	}
	for _, b := range buckets {
		req := store.PutBucketRequest{Now: p.now, Bucket: b}
		p.same("put "+b.Name, nil, nil, p.r.PutBucket(ctx, req), p.m.PutBucket(ctx, req))
	}
	timed := buckets[:3]
	type held struct {
		id      store.LeaseID
		dim     string
		cost    int64
		expires time.Time
	}
	var leases []held
	for p.step = 0; p.step < steps; p.step++ {
		switch rng.IntN(10) {
		case 0: // the clock moves, sometimes back
			d := time.Duration(rng.Int64N(20_000)) * time.Millisecond
			if rng.IntN(5) == 0 {
				d = -time.Duration(rng.Int64N(2500)) * time.Millisecond
			}
			p.now = p.now.Add(d)
		case 1, 2:
			b := timed[rng.IntN(len(timed))]
			req := store.CooldownRequest{Now: p.now, Dimension: b.Name,
				Until: p.now.Add(time.Duration(rng.Int64N(90_000)+1) * time.Millisecond)}
			r, rerr := p.r.Cooldown(ctx, req)
			m, merr := p.m.Cooldown(ctx, req)
			p.same("cooldown "+b.Name+" "+req.Until.Sub(req.Now).String(), r, m, rerr, merr)
		case 3:
			b := timed[rng.IntN(len(timed))]
			req := store.SyncRequest{Now: p.now, Dimension: b.Name, Remaining: rng.Int64N(b.Capacity + 1)}
			r, rerr := p.r.Sync(ctx, req)
			m, merr := p.m.Sync(ctx, req)
			p.same(fmt.Sprintf("sync %s %d", b.Name, req.Remaining), r, m, rerr, merr)
		case 4, 5:
			b := timed[rng.IntN(len(timed))]
			id := store.NewLeaseID()
			req := &store.AcquireRequest{Now: p.now, ID: id, TTL: time.Minute, Poll: time.Second,
				Items: []store.Item{{Dimension: b.Name, Cost: rng.Int64N(b.Capacity) + 1}}}
			var r, m store.AcquireResult
			rerr := p.r.Acquire(ctx, req, &r)
			merr := p.m.Acquire(ctx, req, &m)
			p.same(fmt.Sprintf("acquire %s %d", b.Name, req.Items[0].Cost), r, m, rerr, merr)
			if rerr == nil && r.Granted {
				leases = append(leases, held{id, b.Name, req.Items[0].Cost, r.ExpiresAt})
			}
		case 6:
			if len(leases) == 0 {
				continue
			}
			i := rng.IntN(len(leases))
			l := &leases[i]
			delta := rng.Int64N(3000) + 1
			if rng.IntN(2) == 0 {
				delta = -(rng.Int64N(l.cost) + 1)
			}
			req := store.AdjustRequest{Now: p.now, ID: l.id, Dimension: l.dim, Delta: delta, Held: l.cost, ExpiresAt: l.expires}
			r, rerr := p.r.Adjust(ctx, req)
			m, merr := p.m.Adjust(ctx, req)
			p.same(fmt.Sprintf("adjust %s %d", l.dim, delta), r, m, rerr, merr)
			if rerr == nil {
				l.cost = r.Held
			}
			if rerr != nil || l.cost == 0 {
				leases = append(leases[:i], leases[i+1:]...)
			}
		case 7:
			b := timed[rng.IntN(len(timed))]
			req := store.PenalizeRequest{Now: p.now, Dimension: b.Name, FactorMilli: rng.Int64N(1001)}
			r, rerr := p.r.Penalize(ctx, req)
			m, merr := p.m.Penalize(ctx, req)
			p.same(fmt.Sprintf("penalize %s %d", b.Name, req.FactorMilli), r, m, rerr, merr)
		case 8:
			if rng.IntN(4) != 0 {
				continue
			}
			i := rng.IntN(len(timed))
			b := timed[i]
			b.Capacity = max(1, b.Capacity+rng.Int64N(5)-2)
			b.RefillAmount = b.Capacity
			req := store.PutBucketRequest{Now: p.now, Bucket: b, Reset: rng.IntN(2) == 0}
			p.same(fmt.Sprintf("put %s cap %d reset %v", b.Name, b.Capacity, req.Reset), nil, nil,
				p.r.PutBucket(ctx, req), p.m.PutBucket(ctx, req))
			timed[i] = b
		default:
			req := store.PeekRequest{Now: p.now, Dimensions: []string{"v#rpm", "v#tpm", "v#odd"}}
			r, rerr := p.r.Peek(ctx, req)
			m, merr := p.m.Peek(ctx, req)
			p.same("peek", r, m, rerr, merr)
		}
	}
	req := store.ListBucketsRequest{Now: p.now}
	r, rerr := p.r.ListBuckets(ctx, req)
	m, merr := p.m.ListBuckets(ctx, req)
	byName := func(a, b store.BucketState) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(r, byName)
	slices.SortFunc(m, byName)
	p.same("list", r, m, rerr, merr)
}

// TestCooldownErrors checks the refusals: a concurrent dimension is the
// CheckCoolable error (ErrInvalid), an unknown one a ConfigurationError, and
// neither changes anything.
func TestCooldownErrors(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	put(t, s, t0, store.Bucket{Name: "v#conc", Config: bucket.ConcurrentSlots(2)})
	conc := &store.Bucket{Name: "v#conc", Config: bucket.ConcurrentSlots(2)}
	until := t0.Add(time.Second)
	_, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: "v#conc", Until: until})
	if want := conc.CheckCoolable("cooldown"); err == nil || !errors.Is(err, store.ErrInvalid) || err.Error() != want.Error() {
		t.Errorf("cooldown on a concurrent bucket: %v, want %v", err, want)
	}
	_, err = s.Sync(ctx, store.SyncRequest{Now: t0, Dimension: "v#conc", Remaining: 1})
	if want := conc.CheckCoolable("sync"); err == nil || !errors.Is(err, store.ErrInvalid) || err.Error() != want.Error() {
		t.Errorf("sync on a concurrent bucket: %v, want %v", err, want)
	}
	var ce *store.ConfigurationError
	if _, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: "v#none", Until: until}); !errors.As(err, &ce) || ce.Dimension != "v#none" {
		t.Errorf("cooldown on an unknown bucket: %v, want a ConfigurationError", err)
	}
	if _, err := s.Sync(ctx, store.SyncRequest{Now: t0, Dimension: "v#none"}); !errors.As(err, &ce) || ce.Dimension != "v#none" {
		t.Errorf("sync on an unknown bucket: %v, want a ConfigurationError", err)
	}
	got, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"v#conc"}})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Tokens != 2000 || got[0].CooldownUntil != 0 {
		t.Errorf("concurrent bucket after refusals: %d millitokens, cooldown until %d; want 2000 and 0", got[0].Tokens, got[0].CooldownUntil)
	}
}

// TestAcquireMatchesTake writes random states, with and without a cooldown,
// straight into bucket hashes and requires acquire.lua, which inlines
// bucket.Align and bucket.Take, to answer and store exactly what package
// bucket computes, including the answer to a retried recorded acquisition
// (which refills without debiting). States the store's own operations
// rarely reach (a positive balance before the end of a cooldown) are drawn
// as often as any other, and so are callers behind the refill timestamp,
// within the maximum skew and beyond it (refused).
func TestAcquireMatchesTake(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	s := newStoreOn(t, c)
	rng := rand.New(rand.NewPCG(5, 6))
	for ci, cfg := range diffConfigs(rng) {
		if cfg.Type == bucket.Concurrent {
			continue
		}
		name := fmt.Sprintf("d%d#m", ci)
		put(t, s, t0, store.Bucket{Name: name, Config: cfg})
		key := s.dim(name).bucket
		l := cfg.Limits()
		for range 10 {
			st := bucket.State{Tokens: l.Floor + rng.Int64N(l.Capacity-l.Floor+1), Last: t0.UnixMilli() + rng.Int64N(1<<40)}
			if rng.IntN(4) == 0 {
				st.Tokens = l.Capacity
			}
			now := st.Last + rng.Int64N(1<<uint(rng.IntN(36)+1))
			if rng.IntN(4) == 0 {
				now = st.Last - rng.Int64N(3000) // behind, within the skew or not
			}
			st.Until = diffUntil(rng, st.Last, now)
			if err := c.HSet(ctx, key, "v", st.Tokens, "l", st.Last, "u", st.Until).Err(); err != nil {
				t.Fatal(err)
			}
			cost := rng.Int64N(cfg.Capacity) + 1
			req := &store.AcquireRequest{Now: time.UnixMilli(now), ID: store.NewLeaseID(), TTL: time.Minute,
				Poll: time.Second, Record: rng.IntN(2) == 0, Items: []store.Item{{Dimension: name, Cost: cost}}}
			var res store.AcquireResult
			if err := s.Acquire(ctx, req, &res); err != nil {
				t.Fatal(err)
			}
			al := st
			at, late := bucket.Align(l, st, now, s.skewMs)
			want, wait, ok := bucket.Take(l, al, at, cost*bucket.Milli)
			if late > 0 { // refused for its clock, changing nothing
				want, wait, ok = st, bucket.SkewRetry(l, st, at, late, cost*bucket.Milli), false
			}
			remaining := bucket.Available(l, al, at)
			if ok {
				remaining = want.Tokens
			}
			got := res.Items[0]
			if res.Granted != ok || res.RetryIn != time.Duration(wait)*time.Millisecond || got.Remaining != remaining || got.RetryIn != res.RetryIn {
				t.Fatalf("%+v %+v now %d cost %d: redis %+v, go granted %v wait %d remaining %d", l, st, now, cost, res, ok, wait, remaining)
			}
			if stored := readHashState(t, c, key); stored != want {
				t.Fatalf("%+v %+v now %d cost %d: stored %+v, go %+v", l, st, now, cost, stored, want)
			}
			if !res.Recorded {
				continue
			}
			// A retry of the same acquisition is answered from the record,
			// with the balance refilled to now and nothing debited.
			if err := c.HSet(ctx, key, "v", st.Tokens, "l", st.Last, "u", st.Until).Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.Acquire(ctx, req, &res); err != nil {
				t.Fatal(err)
			}
			if got, want := res.Items[0].Remaining, bucket.Available(l, al, at); !res.Granted || got != want {
				t.Fatalf("%+v %+v now %d: replay granted %v remaining %d, want %d", l, st, now, res.Granted, got, want)
			}
		}
	}
}

// readHashState reads the state fields of a bucket hash.
func readHashState(t *testing.T, c *redis.Client, key string) bucket.State {
	t.Helper()
	v, err := c.HMGet(context.Background(), key, "v", "l", "u").Result()
	if err != nil {
		t.Fatal(err)
	}
	var st bucket.State
	for i, p := range []*int64{&st.Tokens, &st.Last, &st.Until} {
		s, _ := v[i].(string)
		if _, err := fmt.Sscan(s, p); err != nil {
			t.Fatalf("%s field %d %q: %v", key, i, s, err)
		}
	}
	return st
}

// TestCooldownServerClock checks that on the server clock a cooldown lasts
// Until − Now from the server's TIME, whatever the caller's clock says: the
// stored end lies between the server's times read before and after the
// call, plus the duration, and peek and a denied acquisition agree with it.
func TestCooldownServerClock(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	s, err := New(c, WithPrefix(uniquePrefix()), WithTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, t0, store.Bucket{Name: "svc#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	serverMs := func() int64 {
		tm, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	callerNow := time.UnixMilli(1_000_000_000_000) // 2001: far from the server's clock
	const d = time.Hour
	before := serverMs()
	res, err := s.Cooldown(ctx, store.CooldownRequest{Now: callerNow, Dimension: "svc#rpm", Until: callerNow.Add(d)})
	if err != nil {
		t.Fatal(err)
	}
	after := serverMs()
	if lo, hi := before+d.Milliseconds(), after+d.Milliseconds(); res.Until < lo || res.Until > hi {
		t.Fatalf("cooldown until %d, want within [%d, %d] (server time + 1h)", res.Until, lo, hi)
	}
	if res.Before != 10_000 || res.After != 0 {
		t.Errorf("cooldown balances %d → %d, want 10000 → 0", res.Before, res.After)
	}
	st, err := s.Peek(ctx, store.PeekRequest{Now: callerNow, Dimensions: []string{"svc#rpm"}})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].CooldownUntil != res.Until || st[0].Tokens != 0 {
		t.Errorf("peek: cooldown until %d, %d millitokens; want %d and 0", st[0].CooldownUntil, st[0].Tokens, res.Until)
	}
	// The wait runs to the end of the cooldown, then 6 s to earn a request.
	ar := acquire(t, s, callerNow, store.Item{Dimension: "svc#rpm"})
	end := serverMs()
	want := func(at int64) time.Duration { return time.Duration(res.Until+6000-at) * time.Millisecond }
	if ar.Granted || ar.RetryIn > want(after) || ar.RetryIn < want(end) {
		t.Errorf("acquire during the cooldown: %+v, want a denial with a wait within [%s, %s]", ar, want(end), want(after))
	}
}
