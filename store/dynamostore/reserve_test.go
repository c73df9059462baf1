package dynamostore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// resRun drives the same random reservations, cancellations, queued
// acquisitions, dequeues and releases on a DynamoDB store (through two
// handles, as two processes would) and on the memory store, and fails on
// the first answer that differs.
type resRun struct {
	*diffRun
	always bool // the read-then-transact path: every grant is recorded
	// granted reservations and leases, by lease id, with what a client
	// knows of them.
	res   map[store.LeaseID]*resLease
	ids   []store.LeaseID
	queue []store.LeaseID // waiters' ids, reused until granted
	// seen counts the interesting outcomes, for the log.
	seen struct{ pending, returned, ahead, queuedGrant int }
}

type resLease struct {
	items    []store.Item
	valid    time.Time
	recorded bool
	reserved bool
}

var resBuckets = []store.Bucket{
	{Name: "r#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, 10*time.Second)},
	{Name: "r#tpm", Config: bucket.Config{Type: bucket.Tokens, Capacity: 1000, RefillAmount: 700, RefillPeriod: 7 * time.Second, MaxDebt: 300}},
	{Name: "r#conc", Config: bucket.ConcurrentSlots(2)},
	{Name: "r#conc2", Config: bucket.ConcurrentSlots(1)},
}

// TestReservationsMatchMemstore runs random sequences of reservations
// (waits from none to a minute, one or two dimensions, with or without a
// record), cancellations (pending, in use, repeated), queued and one-shot
// acquisitions on concurrent buckets (tickets taken, renewed, expiring,
// dequeued), releases, settlements, reconfigurations and reads, with
// callers slightly or far behind the fleet's clock, and checks that
// DynamoDB answers each exactly as the memory store does (the Go math),
// on both acquisition paths: reserved_until_ms, the waiters map and the
// reservations' lease records must be kept by every operation.
func TestReservationsMatchMemstore(t *testing.T) {
	for _, readFirst := range []bool{false, true} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("readFirst=%t/seed=%d", readFirst, seed), func(t *testing.T) {
				var opts []Option
				if readFirst {
					opts = append(opts, WithReadThenTransact())
				}
				db := newClient()
				table := newTable(t, db)
				r := &resRun{diffRun: &diffRun{t: t, ctx: context.Background(), rng: rand.New(rand.NewPCG(seed, 11)),
					mem: memstore.New(), now: t0}, always: readFirst, res: map[store.LeaseID]*resLease{}}
				r.ddb[0] = openStore(t, db, table, opts...)
				r.ddb[1] = openStore(t, newClient(), table, opts...)
				t.Cleanup(func() { r.mem.Close() })
				for _, b := range resBuckets {
					r.putBucket(b, false)
				}
				for r.step = 0; r.step < 150; r.step++ {
					r.now = r.now.Add(time.Duration(r.rng.IntN(400)) * time.Millisecond)
					r.randomOp()
					if t.Failed() {
						return
					}
				}
				t.Logf("pending reservations %d, cancellations that gave back %d, denials behind waiters %d, grants after waiting %d",
					r.seen.pending, r.seen.returned, r.seen.ahead, r.seen.queuedGrant)
			})
		}
	}
}

// same fails the test when the two stores' answers differ: the same
// error, or no error and the same result.
func (r *resRun) same(op string, got, want any, gerr, werr error) {
	r.t.Helper()
	if gerr != nil || werr != nil {
		if fmt.Sprint(gerr) != fmt.Sprint(werr) {
			r.t.Errorf("step %d, %s:\n dynamodb %v\n memory   %v", r.step, op, gerr, werr)
		}
		return
	}
	r.diffRun.same(op, got, want, gerr, werr)
}

func (r *resRun) randomOp() {
	now := r.at()
	switch x := r.rng.IntN(100); {
	case x < 25:
		r.reserve(now)
	case x < 40:
		r.cancel(now)
	case x < 62:
		r.queued(now)
	case x < 67:
		r.dequeue(now)
	case x < 77:
		r.release(now)
	case x < 82:
		r.adjust(now)
	case x < 85:
		cfg := resBuckets[1].Config
		if r.rng.IntN(2) == 0 {
			cfg = bucket.Config{Type: bucket.Tokens, Capacity: 600, RefillAmount: 600, RefillPeriod: 3 * time.Second}
		}
		r.putBucketAt(now, store.Bucket{Name: "r#tpm", Config: cfg}, r.rng.IntN(4) == 0)
	default:
		r.peekAll(now)
	}
}

func (r *resRun) reserve(now time.Time) {
	var items []store.Item
	switch r.rng.IntN(4) {
	case 0:
		items = []store.Item{{Dimension: "r#rpm", Cost: 1 + r.rng.Int64N(3)}}
	case 1, 2:
		items = []store.Item{{Dimension: "r#tpm", Cost: 100 + r.rng.Int64N(900)}}
	default:
		items = []store.Item{{Dimension: "r#tpm", Cost: 1 + r.rng.Int64N(600)}, {Dimension: "r#rpm", Cost: 1}}
	}
	id := store.NewLeaseID()
	if len(r.ids) > 0 && r.rng.IntN(10) == 0 {
		id = r.ids[r.rng.IntN(len(r.ids))] // a retry, or a reuse
	}
	req := store.ReserveRequest{Now: now, Items: items, ID: id, Caller: "diff", TTL: time.Duration(1+r.rng.IntN(30)) * time.Second,
		MaxWait: []time.Duration{0, time.Second, 10 * time.Second, time.Minute}[r.rng.IntN(4)], Record: r.always || r.rng.IntN(3) == 0}
	req2 := req
	var got, want store.ReserveResult
	gerr := r.handle().Reserve(r.ctx, &req, &got)
	werr := r.mem.Reserve(r.ctx, &req2, &want)
	r.same(fmt.Sprintf("Reserve(%v, max wait %v, record %t)", items, req.MaxWait, req.Record), got, want, gerr, werr)
	if gerr == nil && got.Granted && got.Wait > 0 {
		r.seen.pending++
	}
	if gerr == nil && got.Granted && r.res[id] == nil {
		l := &resLease{valid: got.ValidAt, recorded: got.Recorded, reserved: true}
		for _, ir := range got.Items {
			l.items = append(l.items, store.Item{Dimension: ir.Dimension, Cost: ir.Cost})
		}
		r.res[id] = l
		r.ids = append(r.ids, id)
	}
}

func (r *resRun) pick() (store.LeaseID, *resLease) {
	if len(r.ids) == 0 || r.rng.IntN(12) == 0 {
		return store.NewLeaseID(), nil // never granted
	}
	id := r.ids[r.rng.IntN(len(r.ids))]
	return id, r.res[id]
}

func (r *resRun) cancel(now time.Time) {
	id, l := r.pick()
	var pending []store.LeaseID
	for _, lid := range r.ids {
		if x := r.res[lid]; x.reserved && x.valid.After(now) && (x.recorded || x.items != nil) {
			pending = append(pending, lid)
		}
	}
	if len(pending) > 0 && r.rng.IntN(4) > 0 {
		id = pending[r.rng.IntN(len(pending))]
		l = r.res[id]
	}
	req := store.CancelRequest{Now: now, ID: id, Recorded: l == nil || l.recorded}
	if l != nil && !l.recorded {
		if !l.reserved || l.items == nil {
			return // an unrecorded lease or a cancelled reservation: nothing a client would cancel
		}
		req.Items, req.ValidAt = l.items, l.valid
		l.items = nil // the client cancels it once
	}
	got, gerr := r.handle().Cancel(r.ctx, req)
	want, werr := r.mem.Cancel(r.ctx, req)
	r.same(fmt.Sprintf("Cancel(recorded %t)", req.Recorded), got, want, gerr, werr)
	if len(got.Returned) > 0 {
		r.seen.returned++
	}
}

// queued acquires a concurrent bucket (sometimes both, sometimes with a
// time-based one), usually in line, as one of a few waiters whose ids
// come back until they are granted.
func (r *resRun) queued(now time.Time) {
	items := []store.Item{{Dimension: "r#conc", Cost: 1}}
	switch r.rng.IntN(5) {
	case 0:
		items = append(items, store.Item{Dimension: "r#conc2", Cost: 1})
	case 1:
		items = append(items, store.Item{Dimension: "r#rpm", Cost: 1})
	}
	var id store.LeaseID
	if len(r.queue) > 0 && r.rng.IntN(4) > 0 {
		id = r.queue[r.rng.IntN(len(r.queue))]
	} else {
		id = store.NewLeaseID()
		r.queue = append(r.queue, id)
	}
	if l := r.res[id]; l != nil {
		items = l.items // a retry of a granted waiter
	}
	var queue time.Duration
	if r.rng.IntN(5) > 0 {
		queue = time.Duration(200+r.rng.IntN(3000)) * time.Millisecond
	}
	req := store.AcquireRequest{Now: now, Items: items, ID: id, Caller: "diff", TTL: time.Duration(1+r.rng.IntN(20)) * time.Second,
		Record: r.always, Poll: time.Second, Queue: queue}
	req2 := req
	var got, want store.AcquireResult
	gerr := r.handle().Acquire(r.ctx, &req, &got)
	werr := r.mem.Acquire(r.ctx, &req2, &want)
	r.same(fmt.Sprintf("Acquire(%v, queue %v)", items, queue), got, want, gerr, werr)
	if got.Ahead > 0 {
		r.seen.ahead++
	}
	if gerr == nil && got.Granted && r.res[id] == nil {
		if slices.Contains(r.queue, id) && queue > 0 {
			r.seen.queuedGrant++
		}
		r.res[id] = &resLease{items: items, recorded: true}
		r.ids = append(r.ids, id)
		r.queue = slices.DeleteFunc(r.queue, func(x store.LeaseID) bool { return x == id })
	}
}

func (r *resRun) dequeue(now time.Time) {
	id := store.NewLeaseID()
	if len(r.queue) > 0 {
		id = r.queue[r.rng.IntN(len(r.queue))]
	}
	req := store.DequeueRequest{Now: now, ID: id, Dimensions: [][]string{{"r#conc"}, {"r#conc", "r#conc2"}, {"r#conc2", "r#rpm", "r#conc"}}[r.rng.IntN(3)]}
	gerr := r.handle().Dequeue(r.ctx, req)
	werr := r.mem.Dequeue(r.ctx, req)
	r.same(fmt.Sprintf("Dequeue(%v)", req.Dimensions), nil, nil, gerr, werr)
}

func (r *resRun) release(now time.Time) {
	id, l := r.pick()
	if l != nil && !l.recorded {
		return
	}
	req := store.ReleaseRequest{Now: now, ID: id}
	got, gerr := r.handle().Release(r.ctx, req)
	want, werr := r.mem.Release(r.ctx, req)
	r.same("Release", got, want, gerr, werr)
}

func (r *resRun) adjust(now time.Time) {
	id, l := r.pick()
	if l == nil || !l.recorded || !l.reserved {
		return
	}
	dim := l.items[r.rng.IntN(len(l.items))].Dimension
	req := store.AdjustRequest{Now: now, ID: id, Dimension: dim, Delta: r.rng.Int64N(9) - 4, Recorded: true}
	if req.Delta == 0 {
		req.Delta = 1
	}
	got, gerr := r.handle().Adjust(r.ctx, req)
	want, werr := r.mem.Adjust(r.ctx, req)
	r.same(fmt.Sprintf("Adjust(%s, %d)", dim, req.Delta), got, want, gerr, werr)
}

// peekAll compares every bucket's state (reserved instant and waiters
// included) and the lease records (valid instants included).
func (r *resRun) peekAll(now time.Time) {
	req := store.PeekRequest{Now: now, Dimensions: []string{"r#rpm", "r#tpm", "r#conc", "r#conc2"}}
	got, gerr := r.handle().Peek(r.ctx, req)
	want, werr := r.mem.Peek(r.ctx, req)
	r.same("Peek", got, want, gerr, werr)
	gl, gerr := r.handle().ListBuckets(r.ctx, store.ListBucketsRequest{Now: now})
	wl, werr := r.mem.ListBuckets(r.ctx, store.ListBucketsRequest{Now: now})
	sortStates(gl)
	sortStates(wl)
	r.same("ListBuckets", gl, wl, gerr, werr)
	ga, gerr := r.handle().Leases(r.ctx, store.LeaseQuery{Now: now})
	wa, werr := r.mem.Leases(r.ctx, store.LeaseQuery{Now: now})
	r.same("Leases", leaseKeys(ga), leaseKeys(wa), gerr, werr)
}

// leaseKeys renders lease records in a fixed order.
func leaseKeys(ls []store.LeaseRecord) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = fmt.Sprintf("%s %v %d..%d valid %d", l.ID, l.Items, l.CreatedAt.UnixMilli(), l.ExpiresAt.UnixMilli(), l.ValidAt.UnixMilli())
	}
	slices.Sort(out)
	return out
}
