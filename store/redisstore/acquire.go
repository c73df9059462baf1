package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Acquire implements store.Store in one script call: every item is debited,
// and the lease recorded when an item is concurrent or req.Record is set, or
// nothing changes. Pure requests/tokens acquisitions write no lease record.
func (s *Store) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done(cancel)
	now := s.now(req.Now)
	n := len(req.Items)
	first := s.dim(req.Items[0].Dimension)
	c := newAcquireCall(n)
	keys, args := c.args[3:3+2*n], c.args[3+2*n:]
	for i := range req.Items {
		it := &req.Items[i]
		k := s.dim(it.Dimension)
		if err := s.sameSlot(req.Items[0].Dimension, first, it.Dimension, k); err != nil {
			return err
		}
		keys[2*i], keys[2*i+1] = k.bucketArg, k.indexArg
		args[acquireArgs+2*i], args[acquireArgs+1+2*i] = k.nameArg, &it.Cost
	}
	poll := req.Poll
	c.now, c.ttl, c.poll = now, req.TTL.Milliseconds(), poll.Milliseconds()
	c.id.set(req.ID)
	args[0], args[1], args[3], args[4], args[5], args[6] = &c.now, &c.ttl, &c.poll, &c.id, &req.Caller, first.tagArg
	c.queue = req.Queue.Milliseconds()
	args[7], args[8], args[9] = s.idsArg, &s.skewMs, &c.queue
	args[2] = 0
	if req.Record {
		args[2] = 1
	} else {
		// Without a lease record, the reply to a grant is kept under the
		// operation id, so that a resend is not debited again (see op.lua); a
		// record makes a resend a retry the script recognises.
		c.opKey = opKey(first.tag, "acquire", req.Op)
	}
	args[acquireArgs+2*n], args[acquireArgs+2*n+1] = &c.opKey, &s.opWindowMs
	var v []int64
	switch {
	case s.ackReplicas > 0:
		v, err = s.runAcked(ctx, c, first.bucket)
	case s.batch != nil:
		v, err = s.batch.run(ctx, c)
	default:
		v, err = c.run(ctx, s.rdb, s.honours)
	}
	if err != nil {
		return err
	}
	r := intReply{v: v}
	status := r.int()
	switch status {
	case -1:
		if i := r.int(); r.err == nil && i >= 1 && int(i) <= n {
			return &store.ConfigurationError{Dimension: req.Items[i-1].Dimension}
		}
	case -2:
		i, cost, capm := r.int(), r.int(), r.int()
		if r.err == nil && i >= 1 && int(i) <= n {
			return &store.CostError{Dimension: req.Items[i-1].Dimension, Cost: cost, Capacity: capm / bucket.Milli}
		}
	case -3:
		return store.LeaseInUse(req.ID)
	case 0, 1, 2, 3:
	default:
		return fmt.Errorf("redisstore: acquire: unexpected status %d", status)
	}
	if r.err != nil || status < 0 {
		return fmt.Errorf("redisstore: acquire: malformed script reply %v", v)
	}
	res.Granted, res.Recorded = status > 0, status >= 2
	x := r.int()
	res.RetryIn, res.ExpiresAt = 0, time.Time{}
	if res.Granted {
		res.ExpiresAt = time.UnixMilli(x)
	} else {
		res.RetryIn = time.Duration(x) * time.Millisecond
	}
	if cap(res.Items) >= n {
		res.Items = res.Items[:n]
	} else {
		res.Items = make([]store.ItemResult, n)
	}
	for i, it := range req.Items {
		ir := store.ItemResult{Dimension: it.Dimension, Type: bucket.LimitType(r.int()), Cost: r.int(),
			Capacity: r.int() / bucket.Milli, Remaining: r.int()}
		if !res.Granted {
			ir.RetryIn = time.Duration(r.int()) * time.Millisecond
		}
		res.Items[i] = ir
	}
	res.Ahead, res.Behind = 0, 0
	if !res.Granted {
		res.Ahead = int(r.int())
		res.Behind = time.Duration(r.int()) * time.Millisecond
	}
	if r.err != nil || r.more() {
		return fmt.Errorf("redisstore: acquire: malformed script reply %v", v)
	}
	if status == 2 { // a replay (3) may name the record's items in another order
		s.rememberLease(req.ID, first.vendor)
	}
	return nil
}

// onLease runs fn against the vendor holding lease id's record: the one
// this process remembers, else the hint, else every registered vendor (in
// the hint's slot when slots are checked) until fn reports found.
func (s *Store) onLease(ctx context.Context, id store.LeaseID, hint *dimKeys, fn func(vendor string) (bool, error)) (bool, error) {
	if v, ok := s.leaseVendor(id); ok {
		return fn(v)
	}
	tried := ""
	if hint != nil {
		if found, err := fn(hint.vendor); found || err != nil {
			return found, err
		}
		tried = hint.vendor
	}
	vs, err := s.vendors(ctx)
	if err != nil {
		return false, fail("lease lookup", err)
	}
	for _, v := range vs {
		if v == tried || (hint != nil && s.slotCheck && Slot(v) != hint.slot) {
			continue
		}
		if found, err := fn(v); found || err != nil {
			return found, err
		}
	}
	return false, nil
}

// hint returns the keys of a lease's hinted dimension, or nil when there is
// no usable hint.
func (s *Store) hint(dimension string) *dimKeys {
	if dimension == "" {
		return nil
	}
	return s.dim(dimension)
}
