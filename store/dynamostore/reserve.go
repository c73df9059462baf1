package dynamostore

import (
	"context"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Reserve implements store.Queuer. It takes the paths of Acquire: on the
// fast path one conditional write against the remembered rows (a
// TransactWriteItems of the bucket updates and the lease items or the
// lease-id check; one UpdateItem for a single dimension without a record
// under WithUncheckedLeaseIDs); with WithReadThenTransact a consistent read
// and then the transaction, which always writes a lease record. A
// reservation too long to wait, or refused for its clock, writes nothing.
// The bucket rows keep the latest valid instant in reserved_until_ms, and
// a recorded reservation's lease items its valid instant in valid_ms.
func (s *Store) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	now := req.Now.UnixMilli()
	areq := &store.AcquireRequest{Now: req.Now, Items: req.Items, ID: req.ID, Caller: req.Caller, TTL: req.TTL, Record: req.Record}
	unlock, err := s.lockRows(ctx, dimsOf(areq))
	defer unlock()
	if err != nil {
		return err
	}
	op := &reserveOp{s: s, req: req, areq: areq, now: now, res: res}
	if s.readFirst {
		return s.readThenTransact(ctx, op, areq, now)
	}
	return s.fast(ctx, op, areq, now)
}

// reserveOp is a reservation (see grantOp).
type reserveOp struct {
	s    *Store
	req  *store.ReserveRequest
	areq *store.AcquireRequest // the same request, for the shared paths
	now  int64
	res  *store.ReserveResult
}

// decide runs bucket.Reserve on rows parallel to the request's items, as
// the memory store does: the reservation is valid at the latest instant at
// which every item's balance (aligned with the caller's clock) covers its
// cost, and is made only when that wait is at most MaxWait and no balance
// would fall below bucket.MinBalance.
func (o *reserveOp) decide(bis []*bucketItem, always bool) (*decision, error) {
	req, res, now := o.req, o.res, o.now
	d := &decision{hold: req.Record || always}
	d.record = d.hold
	n := len(bis)
	for i, bi := range bis {
		if err := bi.b.CheckReservable(); err != nil {
			return nil, err
		}
		c, err := bi.b.ResolveCost(req.Items[i])
		if err != nil {
			return nil, err
		}
		d.costs[i] = c
	}
	if cap(res.Items) >= n {
		res.Items = res.Items[:n]
	} else {
		res.Items = make([]store.ItemResult, n)
	}
	*res = store.ReserveResult{Items: res.Items}
	if res.Wait, res.Behind = refuseBehind(bis, d, now, o.s.skew, res.Items); res.Behind > 0 {
		return d, nil
	}
	var ats [store.MaxItems]int64
	valid, tooLong := now, false
	maxWait := req.MaxWait.Milliseconds()
	for i, bi := range bis {
		al := bi.st
		at, _ := bucket.Align(bi.lim, al, now, o.s.skew)
		d.aligned[i], ats[i] = al, at
		w := bucket.RetryIn(bi.lim, al, at, d.costs[i]*bucket.Milli)
		tooLong = tooLong || w > maxWait
		valid = max(valid, at+w)
		res.Items[i] = store.ItemResult{Dimension: bi.b.Name, Type: bi.b.Type, Cost: d.costs[i], Capacity: bi.b.Capacity,
			Remaining: bucket.Available(bi.lim, al, at), RetryIn: msDur(w)}
	}
	wait := valid - now
	if !tooLong {
		var bound int64
		for i, bi := range bis {
			var ok bool
			if d.next[i], ok = bucket.Reserve(bi.lim, d.aligned[i], ats[i], d.costs[i]*bucket.Milli, valid); !ok {
				bound = max(bound, bucket.ReserveBound(bi.lim, d.aligned[i], ats[i], d.costs[i]*bucket.Milli))
			}
		}
		if bound > 0 {
			tooLong, wait = true, bound
		}
	}
	res.Wait = msDur(wait)
	if tooLong {
		return d, nil
	}
	d.granted, d.valid = true, valid
	for i := range bis {
		res.Items[i].Remaining = d.next[i].Tokens
		res.Items[i].Charged = d.next[i].Charged
	}
	return d, nil
}

// replay answers a reservation whose lease id has a record: the grant it
// was when the record holds the same items (its valid instant, or its
// creation for a lease that Acquire granted), else store.ErrLeaseInUse.
func (o *reserveOp) replay(ctx context.Context, d *decision, n int) error {
	ar := store.AcquireResult{Items: o.res.Items}
	li, err := o.s.replay(ctx, o.areq, d.costs[:n], o.now, &ar)
	if err != nil {
		return err
	}
	valid := max(li.valid, li.created)
	*o.res = store.ReserveResult{Granted: true, Recorded: true, Items: ar.Items,
		ValidAt: time.UnixMilli(valid), ExpiresAt: ar.ExpiresAt, Wait: msDur(max(li.valid-o.now, 0))}
	for i := range o.res.Items[:min(n, len(o.res.Items))] {
		// The counter as last read: settlements between the reservation
		// and this answer to its resend are not told apart from earlier ones.
		o.res.Items[i].Charged = d.aligned[i].Charged
	}
	return nil
}

func (o *reserveOp) granted(bis []*bucketItem, d *decision, cache bool) {
	o.res.Granted, o.res.Recorded = true, d.record
	o.res.ValidAt = time.UnixMilli(d.valid)
	o.res.ExpiresAt = time.UnixMilli(d.expiry(o.areq, o.now))
	o.s.cacheGrant(bis, d, o.areq, o.now, cache)
}
