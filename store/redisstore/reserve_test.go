package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// TestReserveMatchesMemory runs random sequences of reservations (recorded
// or not, with and without a maximum wait, reusing ids), cancellations,
// settlements, queued and one-shot acquisitions of concurrent slots by a
// few competing waiters, dequeues, releases, reconfigurations and resets,
// peeks and lease listings, with a clock that jumps forwards and sometimes
// back, on the Redis store and the memory store, and requires the same
// answers at every step: balances, valid instants, what cancellations give
// back, queue places (Ahead) and waiter counts.
func TestReserveMatchesMemory(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runReservePair(t, seed, 300)
		})
	}
}

// pairLease is a grant or reservation the sequence may settle, cancel or
// release.
type pairLease struct {
	id       store.LeaseID
	items    []store.Item
	recorded bool
	validAt  time.Time
	expires  time.Time
}

type reservePair struct {
	*pair
	rng     *rand.Rand
	timed   []store.Bucket
	conc    []string
	waiters []store.LeaseID
	leases  []pairLease
	seen    map[string]int // what the sequence exercised
}

func runReservePair(t *testing.T, seed uint64, steps int) {
	ctx := context.Background()
	p := &reservePair{pair: &pair{t: t, r: newStore(t), m: memstore.New(), now: t0}, rng: rand.New(rand.NewPCG(seed, 91)),
		seen: map[string]int{}}
	p.timed = []store.Bucket{
		{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)},
		{Name: "v#tpm", Config: bucket.Config{Type: bucket.Tokens, Capacity: 5000, RefillAmount: 5000,
			RefillPeriod: time.Minute, MaxDebt: 2000}},
		{Name: "v#odd", Config: bucket.Config{Type: bucket.Tokens, Capacity: 7, RefillAmount: 3, RefillPeriod: 1001 * time.Millisecond}},
	}
	p.conc = []string{"v#c1", "v#c2"}
	all := slices.Clone(p.timed)
	all = append(all, store.Bucket{Name: "v#c1", Config: bucket.ConcurrentSlots(2)}, store.Bucket{Name: "v#c2", Config: bucket.ConcurrentSlots(1)})
	for _, b := range all {
		req := store.PutBucketRequest{Now: p.now, Bucket: b}
		p.same("put "+b.Name, nil, nil, p.r.PutBucket(ctx, req), p.m.PutBucket(ctx, req))
	}
	for range 5 {
		p.waiters = append(p.waiters, store.NewLeaseID())
	}
	for p.step = 0; p.step < steps; p.step++ {
		switch p.rng.IntN(14) {
		case 0: // the clock moves, sometimes back
			d := time.Duration(p.rng.Int64N(20_000)) * time.Millisecond
			if p.rng.IntN(6) == 0 {
				d = -time.Duration(p.rng.Int64N(2500)) * time.Millisecond
			}
			p.now = p.now.Add(d)
		case 1, 2, 3:
			p.reserve(ctx)
		case 4, 5:
			p.cancel(ctx)
		case 6, 7, 8:
			p.queued(ctx)
		case 9:
			p.release(ctx)
		case 10:
			req := store.DequeueRequest{Now: p.now, ID: p.waiters[p.rng.IntN(len(p.waiters))], Dimensions: p.someConc()}
			p.same(fmt.Sprintf("dequeue %s %v", req.ID.String()[:4], req.Dimensions), nil, nil, p.r.Dequeue(ctx, req), p.m.Dequeue(ctx, req))
		case 11:
			p.adjustOrPut(ctx)
		default:
			p.peek(ctx)
		}
	}
	p.peek(ctx)
	for _, what := range []string{"pending reservation", "too long", "cancel gave back", "ahead", "waiters", "reserved until"} {
		if p.seen[what] == 0 {
			t.Errorf("the sequence never exercised %q: %v", what, p.seen)
		}
	}
}

func (p *reservePair) someConc() []string {
	switch p.rng.IntN(3) {
	case 0:
		return []string{p.conc[0]}
	case 1:
		return []string{p.conc[1]}
	}
	return slices.Clone(p.conc)
}

func (p *reservePair) reserve(ctx context.Context) {
	req := &store.ReserveRequest{Now: p.now, ID: store.NewLeaseID(), Caller: "pair", TTL: time.Duration(p.rng.Int64N(60_000)+1) * time.Millisecond,
		MaxWait: time.Duration([]int64{0, 1000, 30_000, 600_000}[p.rng.IntN(4)]) * time.Millisecond, Record: p.rng.IntN(2) == 0}
	if len(p.leases) > 0 && p.rng.IntN(8) == 0 { // a retry or a reuse of an id
		req.ID = p.leases[p.rng.IntN(len(p.leases))].id
	}
	for _, i := range p.rng.Perm(len(p.timed))[:p.rng.IntN(len(p.timed))+1] {
		b := p.timed[i]
		req.Items = append(req.Items, store.Item{Dimension: b.Name, Cost: p.rng.Int64N(b.Capacity) + 1})
	}
	if p.rng.IntN(12) == 0 {
		req.Items = append(req.Items, store.Item{Dimension: p.conc[0]}) // refused
	}
	var r, m store.ReserveResult
	rerr := p.r.Reserve(ctx, req, &r)
	merr := p.m.Reserve(ctx, req, &m)
	p.same(fmt.Sprintf("reserve %s %+v wait %s record %v", req.ID.String()[:4], req.Items, req.MaxWait, req.Record), r, m, rerr, merr)
	switch {
	case rerr == nil && r.Granted && r.Wait > 0:
		p.seen["pending reservation"]++
	case rerr == nil && !r.Granted:
		p.seen["too long"]++
	}
	if rerr == nil && r.Granted && !slices.ContainsFunc(p.leases, func(l pairLease) bool { return l.id == req.ID }) {
		l := pairLease{id: req.ID, recorded: r.Recorded, validAt: r.ValidAt, expires: r.ExpiresAt}
		for _, it := range r.Items {
			l.items = append(l.items, store.Item{Dimension: it.Dimension, Cost: it.Cost})
		}
		p.leases = append(p.leases, l)
	}
}

func (p *reservePair) cancel(ctx context.Context) {
	req := store.CancelRequest{Now: p.now, ID: store.NewLeaseID(), Recorded: true}
	k := -1
	if len(p.leases) > 0 && p.rng.IntN(6) > 0 {
		k = p.rng.IntN(len(p.leases))
		l := p.leases[k]
		req.ID, req.Recorded, req.Hint = l.id, l.recorded, l.items[0].Dimension
		if !l.recorded {
			req.Items, req.ValidAt = l.items, l.validAt
		}
	}
	r, rerr := p.r.Cancel(ctx, req)
	m, merr := p.m.Cancel(ctx, req)
	p.same(fmt.Sprintf("cancel %s recorded %v", req.ID.String()[:4], req.Recorded), r, m, rerr, merr)
	if len(r.Returned) > 0 {
		p.seen["cancel gave back"]++
	}
	if k >= 0 && (rerr == nil || !req.Recorded) && len(p.leases[k].items) > 0 && p.leases[k].validAt.After(time.Time{}) {
		p.leases = slices.Delete(p.leases, k, k+1) // cancelled at most once
	}
}

// queued acquires one or both concurrent dimensions (sometimes with a
// time-based one) for one of the waiters, queueing or not.
func (p *reservePair) queued(ctx context.Context) {
	id := p.waiters[p.rng.IntN(len(p.waiters))]
	req := &store.AcquireRequest{Now: p.now, ID: id, TTL: time.Duration(p.rng.Int64N(30_000)+1) * time.Millisecond, Poll: time.Second}
	if p.rng.IntN(4) > 0 {
		req.Queue = time.Duration(p.rng.Int64N(20_000)+1) * time.Millisecond
	}
	for _, d := range p.someConc() {
		req.Items = append(req.Items, store.Item{Dimension: d})
	}
	if p.rng.IntN(4) == 0 {
		req.Items = append(req.Items, store.Item{Dimension: p.timed[0].Name})
	}
	var r, m store.AcquireResult
	rerr := p.r.Acquire(ctx, req, &r)
	merr := p.m.Acquire(ctx, req, &m)
	p.same(fmt.Sprintf("acquire %s %+v queue %s", id.String()[:4], req.Items, req.Queue), r, m, rerr, merr)
	if r.Ahead > 0 {
		p.seen["ahead"]++
	}
	if rerr == nil && r.Granted {
		p.leases = append(p.leases, pairLease{id: id, items: req.Items, recorded: true, expires: r.ExpiresAt})
		k := slices.Index(p.waiters, id)
		p.waiters[k] = store.NewLeaseID() // a lease id names one grant
	}
}

func (p *reservePair) release(ctx context.Context) {
	if len(p.leases) == 0 {
		return
	}
	k := p.rng.IntN(len(p.leases))
	req := store.ReleaseRequest{ID: p.leases[k].id, Hint: p.leases[k].items[0].Dimension}
	r, rerr := p.r.Release(ctx, req)
	m, merr := p.m.Release(ctx, req)
	p.same(fmt.Sprintf("release %s", req.ID.String()[:4]), r, m, rerr, merr)
	p.leases = slices.Delete(p.leases, k, k+1)
}

// adjustOrPut settles a reservation's item, or reconfigures (sometimes
// resets) a time-based bucket.
func (p *reservePair) adjustOrPut(ctx context.Context) {
	if len(p.leases) > 0 && p.rng.IntN(2) == 0 {
		l := &p.leases[p.rng.IntN(len(p.leases))]
		i := p.rng.IntN(len(l.items))
		if l.items[i].Dimension == p.conc[0] || l.items[i].Dimension == p.conc[1] || l.items[i].Cost == 0 {
			return
		}
		delta := p.rng.Int64N(3000) + 1
		if p.rng.IntN(2) == 0 {
			delta = -(p.rng.Int64N(l.items[i].Cost) + 1)
		}
		req := store.AdjustRequest{Now: p.now, ID: l.id, Dimension: l.items[i].Dimension, Delta: delta, Recorded: l.recorded,
			Held: l.items[i].Cost, ExpiresAt: l.expires}
		r, rerr := p.r.Adjust(ctx, req)
		m, merr := p.m.Adjust(ctx, req)
		p.same(fmt.Sprintf("adjust %s %s %d", l.id.String()[:4], req.Dimension, delta), r, m, rerr, merr)
		if rerr == nil {
			l.items[i].Cost = r.Held
		}
		return
	}
	i := p.rng.IntN(len(p.timed))
	b := p.timed[i]
	switch p.rng.IntN(3) {
	case 0:
		b.Capacity = max(1, b.Capacity+p.rng.Int64N(5)-2)
		b.RefillAmount = b.Capacity
	case 1:
		b.MaxDebt = p.rng.Int64N(b.Capacity+2) - 1
	}
	req := store.PutBucketRequest{Now: p.now, Bucket: b, Reset: p.rng.IntN(3) == 0}
	p.same(fmt.Sprintf("put %s %+v reset %v", b.Name, b.Config, req.Reset), nil, nil, p.r.PutBucket(ctx, req), p.m.PutBucket(ctx, req))
	p.timed[i] = b
}

// peek compares every bucket's state and the lease records.
func (p *reservePair) peek(ctx context.Context) {
	req := store.PeekRequest{Now: p.now, Dimensions: []string{"v#rpm", "v#tpm", "v#odd", "v#c1", "v#c2"}}
	r, rerr := p.r.Peek(ctx, req)
	m, merr := p.m.Peek(ctx, req)
	p.same("peek", r, m, rerr, merr)
	for _, st := range r {
		if st.Waiters > 0 {
			p.seen["waiters"]++
		}
		if st.ReservedUntil > p.now.UnixMilli() {
			p.seen["reserved until"]++
		}
	}
	lq := store.LeaseQuery{Now: p.now}
	rl, rerr := p.r.Leases(ctx, lq)
	ml, merr := p.m.Leases(ctx, lq)
	byID := func(a, b store.LeaseRecord) int { return strings.Compare(a.ID.String(), b.ID.String()) }
	slices.SortFunc(rl, byID)
	slices.SortFunc(ml, byID)
	p.same("leases", rl, ml, rerr, merr)
}
