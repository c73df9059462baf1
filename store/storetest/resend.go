package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/store"
)

// resendCase is one mutating operation sent twice with the same request,
// as a driver sends a request again after its reply was lost.
type resendCase struct {
	name string
	// setup prepares the store; op is the operation, returning its answer
	// (compared between the two sends as formatted with %+v).
	setup func(e *env)
	op    func(e *env) (any, error)
	// natural marks an operation whose second application leaves the same
	// state in every store; the others need the store to recognise the
	// operation id (Harness.DedupesOps).
	natural bool
	// sameAnswer marks an operation whose second answer equals the first
	// in every store (a natural one may report a second call differently,
	// as a second Release that finds no record).
	sameAnswer bool
	// withOp marks a request that carries an operation id: a store that
	// recognises them answers the second send as the first.
	withOp bool
}

// testResend sends each mutating operation twice with the same request
// (same lease id, same operation id) and checks that the state is the one
// a single application leaves and, for a store that recognises operation
// ids, that the second answer is the first.
func testResend(t *testing.T, h Harness) {
	for _, c := range resendCases() {
		t.Run(c.name, func(t *testing.T) {
			if !c.natural && !h.DedupesOps {
				t.Skip("the store does not receive resends of an operation id (Harness.DedupesOps false)")
			}
			e := newEnv(t, h)
			op, _, _ := strings.Cut(c.name, "/")
			e.caps.need(t, strings.ToLower(op))
			if c.setup != nil {
				c.setup(e)
			}
			a1, err1 := c.op(e)
			once := e.snapshot(5)
			a2, err2 := c.op(e)
			e.unchanged(5, once, "sending "+c.name+" again")
			if c.sameAnswer || c.withOp && h.DedupesOps {
				first, second := fmt.Sprintf("%+v %v", a1, err1), fmt.Sprintf("%+v %v", a2, err2)
				if first != second {
					t.Errorf("%s sent again answered\n%s\nwant the first answer\n%s", c.name, second, first)
				}
			}
		})
	}
}

func resendCases() []resendCase {
	tokens := func(e *env) { e.put(0, tpm("rs#tpm", 1000)) }
	both := func(e *env) { e.put(0, tpm("rs#tpm", 1000)); e.put(0, slots("rs#concurrent", 2)) }
	op := idFor("resend/op")
	lease := idFor("resend/lease")
	acquireReq := func(record bool, it store.Item) *store.AcquireRequest {
		return &store.AcquireRequest{Now: At(1), Items: []store.Item{it}, ID: lease, Caller: "storetest", TTL: time.Minute,
			Record: record, Op: idFor("resend/acquire")}
	}
	acquire := func(e *env, req *store.AcquireRequest) (any, error) {
		var res store.AcquireResult
		err := e.s.Acquire(e.ctx, req, &res)
		return res, err
	}
	reserveReq := func(record bool, cost int64) *store.ReserveRequest {
		return &store.ReserveRequest{Now: At(1), Items: []store.Item{item("rs#tpm", cost)}, ID: lease, Caller: "storetest",
			TTL: time.Minute, MaxWait: time.Hour, Record: record, Op: idFor("resend/reserve")}
	}
	reserve := func(e *env, req *store.ReserveRequest) (store.ReserveResult, error) {
		var res store.ReserveResult
		err := e.s.Reserve(e.ctx, req, &res)
		return res, err
	}
	// pending reserves 400 tokens on a drained bucket, valid at validAt.
	var validAt time.Time
	pending := func(record bool) func(e *env) {
		return func(e *env) {
			tokens(e)
			e.grant(e.req(0, item("rs#tpm", 1000)))
			r, err := reserve(e, reserveReq(record, 400))
			if err != nil || !r.Granted {
				e.t.Fatalf("Reserve: %+v, %v", r, err)
			}
			validAt = r.ValidAt
		}
	}
	held := func(record bool) func(e *env) {
		return func(e *env) {
			both(e)
			if r, _ := acquire(e, acquireReq(record, item("rs#tpm", 500))); !r.(store.AcquireResult).Granted {
				e.t.Fatalf("Acquire: %+v", r)
			}
		}
	}
	slot := func(e *env) {
		both(e)
		if r, _ := acquire(e, acquireReq(true, item("rs#concurrent", 1))); !r.(store.AcquireResult).Granted {
			e.t.Fatalf("Acquire: %+v", r)
		}
	}
	return []resendCase{
		{name: "Acquire/unrecorded", withOp: true, setup: tokens, op: func(e *env) (any, error) { return acquire(e, acquireReq(false, item("rs#tpm", 300))) }},
		{name: "Acquire/recorded", withOp: true, setup: tokens, natural: true, sameAnswer: true,
			op: func(e *env) (any, error) { return acquire(e, acquireReq(true, item("rs#tpm", 300))) }},
		{name: "Acquire/concurrent", withOp: true, setup: both, natural: true, sameAnswer: true,
			op: func(e *env) (any, error) { return acquire(e, acquireReq(false, item("rs#concurrent", 1))) }},
		{name: "Reserve/unrecorded", withOp: true, setup: tokens, op: func(e *env) (any, error) { return reserve(e, reserveReq(false, 300)) }},
		{name: "Reserve/recorded", withOp: true, setup: tokens, natural: true, sameAnswer: true,
			op: func(e *env) (any, error) { return reserve(e, reserveReq(true, 300)) }},
		{name: "Adjust/unrecorded", withOp: true, setup: held(false), op: func(e *env) (any, error) {
			return e.s.Adjust(e.ctx, store.AdjustRequest{Now: At(2), ID: lease, Dimension: "rs#tpm", Delta: -200, Held: 500, ExpiresAt: At(60_000), Op: op})
		}},
		{name: "Adjust/recorded", withOp: true, setup: held(true), op: func(e *env) (any, error) {
			return e.s.Adjust(e.ctx, store.AdjustRequest{Now: At(2), ID: lease, Recorded: true, Dimension: "rs#tpm", Delta: -200, Op: op})
		}},
		{name: "Adjust/charge", withOp: true, setup: held(true), op: func(e *env) (any, error) {
			return e.s.Adjust(e.ctx, store.AdjustRequest{Now: At(2), ID: lease, Recorded: true, Dimension: "rs#tpm", Delta: 100, Op: op})
		}},
		{name: "Penalize", withOp: true, setup: tokens, op: func(e *env) (any, error) {
			return e.s.Penalize(e.ctx, store.PenalizeRequest{Now: At(2), Dimension: "rs#tpm", FactorMilli: 500, Op: op})
		}},
		{name: "Cancel/unrecorded", withOp: true, setup: pending(false), op: func(e *env) (any, error) {
			return e.s.Cancel(e.ctx, store.CancelRequest{Now: At(2), ID: lease, Items: []store.Item{item("rs#tpm", 400)}, ValidAt: validAt, Op: op})
		}},
		{name: "Cancel/recorded", withOp: true, setup: pending(true), natural: true, op: func(e *env) (any, error) {
			return e.s.Cancel(e.ctx, store.CancelRequest{Now: At(2), ID: lease, Recorded: true, Hint: "rs#tpm", Op: op})
		}},
		{name: "Release", withOp: true, setup: slot, natural: true, op: func(e *env) (any, error) {
			return e.s.Release(e.ctx, store.ReleaseRequest{Now: At(2), ID: lease, Hint: "rs#concurrent", Op: op})
		}},
		{name: "Extend", setup: slot, natural: true, sameAnswer: true, op: func(e *env) (any, error) {
			return e.s.Extend(e.ctx, store.ExtendRequest{Now: At(2), ID: lease, TTL: 2 * time.Minute, Hint: "rs#concurrent"})
		}},
		{name: "Cooldown", setup: tokens, natural: true, op: func(e *env) (any, error) {
			return e.s.Cooldown(e.ctx, store.CooldownRequest{Now: At(2), Dimension: "rs#tpm", Until: At(2_000)})
		}},
		{name: "Sync", setup: tokens, natural: true, op: func(e *env) (any, error) {
			return e.s.Sync(e.ctx, store.SyncRequest{Now: At(2), Dimension: "rs#tpm", Remaining: 100})
		}},
		{name: "PutBucket", setup: slot, natural: true, sameAnswer: true, op: func(e *env) (any, error) {
			return nil, e.s.PutBucket(e.ctx, store.PutBucketRequest{Now: At(2), Bucket: slots("rs#concurrent", 5)})
		}},
		{name: "DeleteBucket", setup: held(false), natural: true, op: func(e *env) (any, error) {
			return nil, e.s.DeleteBucket(e.ctx, store.DeleteBucketRequest{Name: "rs#tpm"})
		}},
		{name: "Dequeue", setup: both, natural: true, sameAnswer: true, op: func(e *env) (any, error) {
			return nil, e.s.Dequeue(e.ctx, store.DequeueRequest{Now: At(2), ID: lease, Dimensions: []string{"rs#concurrent"}})
		}},
		{name: "Reconcile", setup: slot, natural: true, op: func(e *env) (any, error) {
			return e.s.Reconcile(e.ctx, store.ReconcileRequest{Now: At(120_000), Limit: 10})
		}},
	}
}
