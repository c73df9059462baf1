package storetest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// replayLease is what the replayer knows of a granted lease.
type replayLease struct {
	id        store.LeaseID
	validAt   time.Time    // a reservation's valid instant
	items     []store.Item // a reservation's items at resolved costs
	recorded  bool
	expiresAt time.Time
	held      map[string]int64
}

// replay runs v's steps through a fresh store and compares every result.
func replay(t *testing.T, h Harness, v Vector) {
	r := newRunner(contract.Checked(h.NewStore(t)), v.BaseMs, v.Name+"/")
	for i, st := range v.Steps {
		got, err := r.exec(st)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if h.AlwaysRecords && (st.Op == "acquire" || st.Op == "reserve") && got.Granted && !st.Expect.Recorded {
			got.Recorded = false // the store records more than it must
		}
		forgetCharged(&got, st.Expect)
		if !sameExpect(got, st.Expect) {
			t.Fatalf("step %d (+%dms %s %s%s%v):\n got  %s\n want %s", i, st.AtMs, st.Op, st.Lease, st.Dimension, st.Items, jsonString(got), jsonString(st.Expect))
		}
	}
}

// runner executes steps against a store, remembering what a client would
// know of each granted lease.
type runner struct {
	s      fullStore
	ctx    context.Context
	baseMs int64
	prefix string // lease labels are ids idFor(prefix+label)
	leases map[string]*replayLease
	res    store.AcquireResult
	// last sends the last resendable step's request again, as it was
	// (nil after any other step).
	last func() (Expect, error)
}

func newRunner(s store.Store, baseMs int64, prefix string) *runner {
	return &runner{s: asFull(s), ctx: context.Background(), baseMs: baseMs, prefix: prefix, leases: map[string]*replayLease{}}
}

func (r *runner) at(ms int64) time.Time { return time.UnixMilli(r.baseMs + ms).UTC() }

func (r *runner) rel(tm time.Time) int64 {
	if tm.IsZero() {
		return 0
	}
	return tm.UnixMilli() - r.baseMs
}

// exec runs one step and returns its outcome in vector form; a store error
// becomes Expect.Error. Only a malformed step is an error.
func (r *runner) exec(st Step) (Expect, error) {
	now := r.at(st.AtMs)
	var got Expect
	var err error
	if st.Resend {
		if r.last != nil {
			got, err = r.last()
		}
		if err != nil {
			got = Expect{Error: ErrName(err)}
		}
		return got, nil
	}
	if !resendable(st.Op) {
		r.last = nil
	}
	switch st.Op {
	case "put_bucket":
		var req store.PutBucketRequest
		if req, err = st.putRequest(now); err == nil {
			err = r.s.PutBucket(r.ctx, req)
		}
	case "delete_bucket":
		err = r.s.DeleteBucket(r.ctx, store.DeleteBucketRequest{Name: st.Name})
	case "acquire":
		got, err = r.acquire(st, now)
	case "release":
		req := store.ReleaseRequest{Now: now, ID: r.lease(st.Lease).id, Op: r.op()}
		r.last = func() (got Expect, err error) {
			rr, err := r.s.Release(r.ctx, req)
			got.Released = rr.Released
			for _, x := range rr.Restored {
				got.RestoredItems = append(got.RestoredItems, RestoredExpect(x))
			}
			slices.SortFunc(got.RestoredItems, func(a, b RestoredExpect) int { return strings.Compare(a.Dimension, b.Dimension) })
			return got, err
		}
		got, err = r.last()
	case "adjust":
		l := r.lease(st.Lease)
		req := store.AdjustRequest{Now: now, ID: l.id, Recorded: l.recorded, Dimension: st.Dimension,
			Delta: st.Delta, Held: l.held[st.Dimension], ExpiresAt: l.expiresAt, Op: r.op()}
		r.last = func() (got Expect, err error) {
			ar, err := r.s.Adjust(r.ctx, req)
			if err == nil {
				l.held[st.Dimension] = ar.Held
				got.Held, got.Applied, got.Remaining = ar.Held, ar.Applied, ar.Remaining
			}
			return got, err
		}
		got, err = r.last()
	case "extend":
		l := r.lease(st.Lease)
		var exp time.Time
		exp, err = r.s.Extend(r.ctx, store.ExtendRequest{Now: now, ID: l.id, TTL: time.Duration(st.TTLMs) * time.Millisecond})
		if err == nil {
			l.expiresAt = exp
			got.ExpiresAtMs = r.rel(exp)
		}
	case "penalize":
		req := store.PenalizeRequest{Now: now, Dimension: st.Dimension, FactorMilli: st.FactorMilli, Op: r.op()}
		r.last = func() (got Expect, err error) {
			pr, err := r.s.Penalize(r.ctx, req)
			got.Before, got.After = pr.Before, pr.After
			return got, err
		}
		got, err = r.last()
	case "cooldown":
		var cr store.CooldownResult
		cr, err = r.s.Cooldown(r.ctx, store.CooldownRequest{Now: now, Dimension: st.Dimension, Until: now.Add(time.Duration(st.CooldownMs) * time.Millisecond)})
		got.Before, got.After = cr.Before, cr.After
		if cr.Until != 0 {
			got.UntilMs = cr.Until - r.baseMs
		}
	case "sync":
		var sr store.SyncResult
		sr, err = r.s.Sync(r.ctx, store.SyncRequest{Now: now, Dimension: st.Dimension, Remaining: st.Remaining})
		got.Before, got.After = sr.Before, sr.After
	case "peek":
		var bs []store.BucketState
		bs, err = r.s.Peek(r.ctx, store.PeekRequest{Now: now, Dimensions: st.Dimensions})
		for _, b := range bs {
			got.Buckets = append(got.Buckets, r.bucketExpect(b))
		}
	case "reserve":
		got, err = r.reserve(st, now)
	case "cancel":
		got, err = r.cancel(st, now)
	case "dequeue":
		err = r.s.Dequeue(r.ctx, store.DequeueRequest{Now: now, ID: idFor(r.prefix + st.Lease), Dimensions: st.Dimensions})
	case "reconcile":
		var rr store.ReconcileResult
		rr, err = r.s.Reconcile(r.ctx, store.ReconcileRequest{Now: now, Limit: st.Limit})
		got.Restored, got.Reclaimed, got.AlreadyCapped, got.Orphans, got.More = rr.Restored, rr.Reclaimed, rr.AlreadyCapped, rr.Orphans, rr.More
		got.Dimensions = rr.Dimensions
	default:
		return Expect{}, fmt.Errorf("unknown op %q", st.Op)
	}
	if err != nil {
		got = Expect{Error: ErrName(err)}
	}
	return got, nil
}

func (r *runner) acquire(st Step, now time.Time) (Expect, error) {
	req := &store.AcquireRequest{Now: now, ID: idFor(r.prefix + st.Lease), Caller: "vectors",
		TTL: time.Duration(st.TTLMs) * time.Millisecond, Record: st.Record, Poll: time.Duration(st.PollMs) * time.Millisecond,
		Queue: time.Duration(st.QueueMs) * time.Millisecond, Op: r.op()}
	for _, it := range st.Items {
		req.Items = append(req.Items, store.Item{Dimension: it.Dimension, Cost: it.Cost})
	}
	r.last = func() (Expect, error) { return r.sendAcquire(st, req) }
	return r.last()
}

// sendAcquire sends an acquisition and records a grant's lease.
func (r *runner) sendAcquire(st Step, req *store.AcquireRequest) (Expect, error) {
	if err := r.s.Acquire(r.ctx, req, &r.res); err != nil {
		return Expect{}, err
	}
	res := &r.res
	got := Expect{Granted: res.Granted, RetryInMs: res.RetryIn.Milliseconds(), Recorded: res.Recorded, ExpiresAtMs: r.rel(res.ExpiresAt), Ahead: res.Ahead}
	for _, ir := range res.Items {
		got.Items = append(got.Items, ItemExpect{Dimension: ir.Dimension, Cost: ir.Cost, Remaining: ir.Remaining, RetryInMs: ir.RetryIn.Milliseconds()})
	}
	if res.Granted {
		l := &replayLease{id: req.ID, recorded: res.Recorded, expiresAt: res.ExpiresAt, held: map[string]int64{}}
		for _, ir := range res.Items {
			l.held[ir.Dimension] = ir.Cost
		}
		r.leases[st.Lease] = l
	}
	return got, nil
}

func (r *runner) bucketExpect(b store.BucketState) BucketExpect {
	be := BucketExpect{Name: b.Name, Tokens: b.Tokens, LastRefillMs: b.LastRefill - r.baseMs, ActiveLeases: b.ActiveLeases}
	if !b.NextExpiry.IsZero() {
		x := r.rel(b.NextExpiry)
		be.NextExpiryMs = &x
	}
	if b.CooldownUntil != 0 {
		u := b.CooldownUntil - r.baseMs
		be.CooldownUntilMs = &u
	}
	if b.ReservedUntil != 0 {
		u := b.ReservedUntil - r.baseMs
		be.ReservedUntilMs = &u
	}
	be.Waiters = b.Waiters
	if b.Type != bucket.Concurrent {
		c := b.Charged
		be.Charged = &c
	}
	return be
}

// lease returns what the runner knows of the lease labelled label. A lease
// that was never granted gets an id of its own: operations on it find no
// record.
func (r *runner) lease(label string) *replayLease {
	l := r.leases[label]
	if l == nil {
		l = &replayLease{id: idFor("never-granted/" + r.prefix + label), recorded: true, held: map[string]int64{}}
		r.leases[label] = l
	}
	return l
}

// sameExpect compares outcomes, treating nil and empty slices alike.
// forgetCharged drops from got the settlement counters that want leaves
// out: vectors written before the counter existed do not pin it.
func forgetCharged(got *Expect, want Expect) {
	for i := range got.Items {
		if i >= len(want.Items) || want.Items[i].Charged == nil {
			got.Items[i].Charged = nil
		}
	}
	for i := range got.Buckets {
		if i >= len(want.Buckets) || want.Buckets[i].Charged == nil {
			got.Buckets[i].Charged = nil
		}
	}
}

func sameExpect(a, b Expect) bool {
	norm := func(e Expect) Expect {
		if len(e.Items) == 0 {
			e.Items = nil
		}
		if len(e.Returned) == 0 {
			e.Returned = nil
		}
		if len(e.RestoredItems) == 0 {
			e.RestoredItems = nil
		}
		if len(e.Buckets) == 0 {
			e.Buckets = nil
		}
		if len(e.Dimensions) == 0 {
			e.Dimensions = nil
		}
		return e
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
