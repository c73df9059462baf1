package storetest

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/store"
)

// replayLease is what the replayer knows of a granted lease.
type replayLease struct {
	id        store.LeaseID
	recorded  bool
	expiresAt time.Time
	held      map[string]int64
}

// replay runs v's steps through a fresh store and compares every result.
func replay(t *testing.T, h Harness, v Vector) {
	s := h.NewStore(t)
	ctx := context.Background()
	base := time.UnixMilli(v.BaseMs).UTC()
	at := func(ms int64) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	rel := func(tm time.Time) int64 {
		if tm.IsZero() {
			return 0
		}
		return tm.UnixMilli() - v.BaseMs
	}
	leases := map[string]*replayLease{}
	var res store.AcquireResult
	for i, st := range v.Steps {
		now := at(st.AtMs)
		var got Expect
		var err error
		switch st.Op {
		case "put_bucket":
			var b store.Bucket
			if b, err = st.Bucket.Config(); err == nil {
				err = s.PutBucket(ctx, now, b, st.Reset)
			}
		case "delete_bucket":
			err = s.DeleteBucket(ctx, st.Name)
		case "acquire":
			req := &store.AcquireRequest{Now: now, ID: idFor(v.Name + "/" + st.Lease), Caller: "vectors",
				TTL: time.Duration(st.TTLMs) * time.Millisecond, Record: st.Record, Poll: time.Duration(st.PollMs) * time.Millisecond}
			for _, it := range st.Items {
				req.Items = append(req.Items, store.Item{Dimension: it.Dimension, Cost: it.Cost})
			}
			if err = s.Acquire(ctx, req, &res); err != nil {
				break
			}
			got.Granted, got.RetryInMs, got.Recorded = res.Granted, res.RetryIn.Milliseconds(), res.Recorded
			got.ExpiresAtMs = rel(res.ExpiresAt)
			for _, ir := range res.Items {
				got.Items = append(got.Items, ItemExpect{Dimension: ir.Dimension, Cost: ir.Cost, Remaining: ir.Remaining, RetryInMs: ir.RetryIn.Milliseconds()})
			}
			if res.Granted {
				l := &replayLease{id: req.ID, recorded: res.Recorded, expiresAt: res.ExpiresAt, held: map[string]int64{}}
				for _, ir := range res.Items {
					l.held[ir.Dimension] = ir.Cost
				}
				leases[st.Lease] = l
			}
			if h.AlwaysRecords && res.Granted && !st.Expect.Recorded {
				got.Recorded = false // the store records more than it must
			}
		case "release":
			var r store.ReleaseResult
			r, err = s.Release(ctx, store.ReleaseRequest{Now: now, ID: lease(t, leases, st.Lease).id})
			got.Released = r.Released
			for _, x := range r.Restored {
				got.RestoredItems = append(got.RestoredItems, RestoredExpect(x))
			}
			slices.SortFunc(got.RestoredItems, func(a, b RestoredExpect) int { return strings.Compare(a.Dimension, b.Dimension) })
		case "adjust":
			l := lease(t, leases, st.Lease)
			var r store.AdjustResult
			r, err = s.Adjust(ctx, store.AdjustRequest{Now: now, ID: l.id, Recorded: l.recorded, Dimension: st.Dimension,
				Delta: st.Delta, Held: l.held[st.Dimension], ExpiresAt: l.expiresAt})
			if err == nil {
				l.held[st.Dimension] = r.Held
				got.Held, got.Applied, got.Remaining = r.Held, r.Applied, r.Remaining
			}
		case "extend":
			l := lease(t, leases, st.Lease)
			var exp time.Time
			exp, err = s.Extend(ctx, store.ExtendRequest{Now: now, ID: l.id, TTL: time.Duration(st.TTLMs) * time.Millisecond})
			if err == nil {
				l.expiresAt = exp
				got.ExpiresAtMs = rel(exp)
			}
		case "penalize":
			var r store.PenalizeResult
			r, err = s.Penalize(ctx, store.PenalizeRequest{Now: now, Dimension: st.Dimension, FactorMilli: st.FactorMilli})
			got.Before, got.After = r.Before, r.After
		case "peek":
			var bs []store.BucketState
			bs, err = s.Peek(ctx, now, st.Dimensions)
			for _, b := range bs {
				be := BucketExpect{Name: b.Name, Tokens: b.Tokens, LastRefillMs: b.LastRefill - v.BaseMs, ActiveLeases: b.ActiveLeases}
				if !b.NextExpiry.IsZero() {
					x := rel(b.NextExpiry)
					be.NextExpiryMs = &x
				}
				got.Buckets = append(got.Buckets, be)
			}
		case "reconcile":
			var r store.ReconcileResult
			r, err = s.Reconcile(ctx, store.ReconcileRequest{Now: now, Limit: st.Limit})
			got.Restored, got.Reclaimed, got.AlreadyCapped, got.Orphans, got.More = r.Restored, r.Reclaimed, r.AlreadyCapped, r.Orphans, r.More
			got.Dimensions = r.Dimensions
		default:
			t.Fatalf("step %d: unknown op %q", i, st.Op)
		}
		if err != nil {
			got = Expect{Error: ErrName(err)}
		}
		if !sameExpect(got, st.Expect) {
			t.Fatalf("step %d (+%dms %s %s%s%v):\n got  %s\n want %s", i, st.AtMs, st.Op, st.Lease, st.Dimension, st.Items, jsonString(got), jsonString(st.Expect))
		}
	}
}

func lease(t *testing.T, m map[string]*replayLease, label string) *replayLease {
	t.Helper()
	l := m[label]
	if l == nil {
		// A lease that was never granted: operations on it find no record.
		l = &replayLease{id: idFor("never-granted/" + label), recorded: true, held: map[string]int64{}}
		m[label] = l
	}
	return l
}

// sameExpect compares outcomes, treating nil and empty slices alike.
func sameExpect(a, b Expect) bool {
	norm := func(e Expect) Expect {
		if len(e.Items) == 0 {
			e.Items = nil
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
