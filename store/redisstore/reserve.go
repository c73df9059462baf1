package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Reserve implements store.Queuer in one script call: every item is
// debited and the reservation recorded when req.Record is set, or nothing
// changes.
func (s *Store) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done(cancel)
	n := len(req.Items)
	first := s.dim(req.Items[0].Dimension)
	keys := make([]string, 0, 2*n)
	args := make([]any, 0, 11+2*n)
	rec := 0
	if req.Record {
		rec = 1
	}
	args = append(args, s.now(req.Now), req.TTL.Milliseconds(), rec, req.MaxWait.Milliseconds(), req.ID.String(),
		req.Caller, first.tag, s.ids, s.skewMs)
	for _, it := range req.Items {
		k := s.dim(it.Dimension)
		if err := s.sameSlot(req.Items[0].Dimension, first, it.Dimension, k); err != nil {
			return err
		}
		keys = append(keys, k.bucket, k.index)
		args = append(args, it.Dimension, it.Cost)
	}
	// The reply is kept under the operation id (see op.lua): a lease
	// record alone would make a resend a retry, answered with the items'
	// waits as they are now, not as the reservation saw them.
	args = append(args, opKey(first.tag, "reserve", req.Op), s.opWindowMs)
	v, err := s.runW(ctx, "reserve", reserveScript, keys, args...)
	if err != nil {
		return err
	}
	r := reply{v: v}
	status := r.int()
	switch status {
	case -1, -4:
		i := r.int()
		if r.err != nil || i < 1 || int(i) > n {
			break
		}
		d := req.Items[i-1].Dimension
		if status == -1 {
			return &store.ConfigurationError{Dimension: d}
		}
		return (&store.Bucket{Name: d, Config: bucket.Config{Type: bucket.Concurrent}}).CheckReservable()
	case -2:
		i, cost, capm := r.int(), r.int(), r.int()
		if r.err == nil && i >= 1 && int(i) <= n {
			return &store.CostError{Dimension: req.Items[i-1].Dimension, Cost: cost, Capacity: capm / bucket.Milli}
		}
	case -3:
		return store.LeaseInUse(req.ID)
	case 0, 1, 2, 3:
		return s.readReserve(&r, v, req, res, status, first.vendor)
	}
	return fmt.Errorf("redisstore: reserve: unexpected script reply %v", v)
}

// readReserve fills res from the reserve script's reply after its status.
func (s *Store) readReserve(r *reply, v []any, req *store.ReserveRequest, res *store.ReserveResult, status int64, vendor string) error {
	n := len(req.Items)
	items := res.Items
	if cap(items) >= n {
		items = items[:n]
	} else {
		items = make([]store.ItemResult, n)
	}
	*res = store.ReserveResult{Items: items, Granted: status > 0, Recorded: status >= 2}
	res.Wait = time.Duration(r.int()) * time.Millisecond
	valid, exp := r.int(), r.int()
	if res.Granted {
		res.ValidAt, res.ExpiresAt = time.UnixMilli(valid), time.UnixMilli(exp)
	}
	for i, it := range req.Items {
		res.Items[i] = store.ItemResult{Dimension: it.Dimension, Type: bucket.LimitType(r.int()), Cost: r.int(),
			Capacity: r.int() / bucket.Milli, Remaining: r.int(), RetryIn: time.Duration(r.int()) * time.Millisecond}
	}
	if status == 0 {
		res.Behind = time.Duration(r.int()) * time.Millisecond
	} else {
		for i := range res.Items {
			res.Items[i].Charged = r.int()
		}
	}
	if r.err != nil || r.more() {
		return fmt.Errorf("redisstore: reserve: malformed script reply %v", v)
	}
	if status == 2 {
		s.rememberLease(req.ID, vendor)
	}
	return nil
}

// Cancel implements store.Queuer in one script call (for a recorded
// reservation, one per vendor tried when this process does not know where
// its record is, as Release).
func (s *Store) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.CancelResult{}, err
	}
	defer done(cancel)
	if !req.Recorded {
		return s.cancelUnrecorded(ctx, req)
	}
	var out store.CancelResult
	var opErr error
	id := req.ID.String()
	_, err = s.onLease(ctx, req.ID, s.hint(req.Hint), func(vendor string) (bool, error) {
		v, err := s.runW(ctx, "cancel", cancelScript,
			s.leaseKeys(vendor, id), s.keyspace, id, s.now(req.Now), s.skewMs,
			opKey(s.vendorTag(vendor), "cancel", req.Op), s.opWindowMs)
		if err != nil {
			return false, err
		}
		r := reply{v: v}
		switch r.int() {
		case 0:
			return false, r.err
		case -1:
			opErr = store.NotReservation(req.ID)
			return true, r.err
		}
		out.Cancelled = true
		out.Returned = readReturned(&r)
		return true, r.err
	})
	switch {
	case err != nil:
		return store.CancelResult{}, err
	case opErr != nil:
		return store.CancelResult{}, opErr
	}
	if out.Cancelled {
		s.forgetLease(req.ID)
	}
	return out, nil
}

// cancelUnrecorded gives back a reservation without a record, as its
// caller describes it.
func (s *Store) cancelUnrecorded(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	if len(req.Items) == 0 {
		return store.CancelResult{Cancelled: req.Now.Before(req.ValidAt)}, nil
	}
	first := s.dim(req.Items[0].Dimension)
	keys := make([]string, 0, len(req.Items))
	args := make([]any, 0, 5+2*len(req.Items))
	args = append(args, s.now(req.Now), s.skewMs, req.ValidAt.UnixMilli())
	for _, it := range req.Items {
		k := s.dim(it.Dimension)
		if err := s.sameSlot(req.Items[0].Dimension, first, it.Dimension, k); err != nil {
			return store.CancelResult{}, err
		}
		keys = append(keys, k.bucket)
		args = append(args, it.Dimension, it.Cost)
	}
	args = append(args, opKey(first.tag, "cancel", req.Op), s.opWindowMs)
	v, err := s.runW(ctx, "cancel", unreserveScript, keys, args...)
	if err != nil {
		return store.CancelResult{}, err
	}
	r := reply{v: v}
	out := store.CancelResult{Cancelled: r.int() == 1}
	out.Returned = readReturned(&r)
	if r.err != nil {
		return store.CancelResult{}, fmt.Errorf("redisstore: cancel: malformed script reply %v: %w", v, r.err)
	}
	return out, nil
}

// readReturned reads the (dimension, amount) pairs that end a cancel
// script's reply.
func readReturned(r *reply) []store.Returned {
	var out []store.Returned
	for r.more() && r.err == nil {
		out = append(out, store.Returned{Dimension: r.str(), Amount: r.int()})
	}
	return out
}

// Dequeue implements store.Queuer: one script call per Cluster slot (one in
// all on a standalone server).
func (s *Store) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done(cancel)
	groups := map[uint16][]string{}
	names := map[uint16][]any{}
	var order []uint16
	for _, d := range req.Dimensions {
		k := s.dim(d)
		g := uint16(0)
		if s.slotCheck {
			g = k.slot
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], k.queue, k.qexp)
		names[g] = append(names[g], d)
	}
	id := req.ID.String()
	for _, g := range order {
		args := append([]any{s.now(req.Now), id, s.freedChannel()}, names[g]...)
		if _, err := s.runW(ctx, "dequeue", dequeueScript, groups[g], args...); err != nil {
			return err
		}
	}
	return nil
}
