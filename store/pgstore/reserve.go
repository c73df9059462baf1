package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Reserve implements store.Queuer in one call of the reserve function,
// which locks the buckets in name order, debits every item or none and,
// with req.Record, writes the lease record with its valid instant.
func (s *Store) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	n := len(req.Items)
	var dimsBuf [store.MaxItems]string
	var costsBuf [store.MaxItems]int64
	dims, costs := itemArgs(req.Items, dimsBuf[:n], costsBuf[:n])
	var (
		errCode, errDim             *string
		granted, recorded           *bool
		nowMs, wait, valid, expires *int64
		col                         itemColumns
		charged                     []int64
	)
	err = s.pool.QueryRow(ctx, s.q.reserve, dims, costs, s.now(req.Now), req.TTL.Milliseconds(), uuidOf(req.ID),
		req.Caller, req.Record, req.MaxWait.Milliseconds(), s.skewMs()).
		Scan(&errCode, &errDim, &granted, &recorded, &nowMs, &wait, &valid, &expires, &col.types, &col.costs, &col.caps, &col.remain, &col.waits, &charged)
	if err != nil {
		return fail("reserve", err)
	}
	if errCode != nil {
		return reserveError(req, *errCode, deref(errDim), col.costs, col.caps)
	}
	if !col.complete(n) || granted == nil || recorded == nil || wait == nil || (*granted && (valid == nil || expires == nil || len(charged) != n)) {
		return fmt.Errorf("pgstore: reserve: malformed result for %d items (schema older than this code? run Migrate)", n)
	}
	*res = store.ReserveResult{Items: col.results(req.Items, res.Items), Granted: *granted, Recorded: *recorded,
		Wait: time.Duration(*wait) * time.Millisecond}
	if res.Granted {
		for i := range res.Items {
			res.Items[i].Charged = charged[i]
		}
	}
	if res.Granted {
		res.ValidAt, res.ExpiresAt = time.UnixMilli(*valid), time.UnixMilli(*expires)
	} else {
		// A denial's o_expires is the caller's lag when its clock was
		// refused (see migration 005), else NULL.
		res.Behind = time.Duration(deref(expires)) * time.Millisecond
	}
	return nil
}

// reserveError turns the reserve function's error code into the
// contract's error.
func reserveError(req *store.ReserveRequest, code, dim string, costs, caps []int64) error {
	i := -1
	for k, it := range req.Items {
		if it.Dimension == dim {
			i = k
		}
	}
	switch code {
	case "unknown":
		return &store.ConfigurationError{Dimension: dim}
	case "concurrent":
		return (&store.Bucket{Name: dim, Config: bucket.Config{Type: bucket.Concurrent}}).CheckReservable()
	case "cost":
		if i >= 0 && i < len(costs) && i < len(caps) {
			return &store.CostError{Dimension: dim, Cost: costs[i], Capacity: caps[i]}
		}
	case "inuse":
		return store.LeaseInUse(req.ID)
	}
	return fmt.Errorf("pgstore: reserve: unexpected result %q for %q", code, dim)
}

// Cancel implements store.Queuer in one call of the cancel function. A
// recorded reservation's record is locked and deleted before its buckets
// are locked, in name order.
func (s *Store) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.CancelResult{}, err
	}
	dims, costs := []string{}, []int64{}
	var valid int64
	if !req.Recorded {
		for _, it := range req.Items {
			dims, costs = append(dims, it.Dimension), append(costs, it.Cost)
		}
		valid = req.ValidAt.UnixMilli()
	}
	var (
		code      *string
		cancelled bool
		rdims     []string
		amounts   []int64
	)
	err = s.pool.QueryRow(ctx, s.q.cancel, uuidOf(req.ID), req.Recorded, dims, costs, valid, s.now(req.Now), s.skewMs()).
		Scan(&code, &cancelled, &rdims, &amounts)
	if err != nil {
		return store.CancelResult{}, fail("cancel", err)
	}
	if code != nil {
		if *code == "notres" {
			return store.CancelResult{}, store.NotReservation(req.ID)
		}
		return store.CancelResult{}, fmt.Errorf("pgstore: cancel: unexpected result %q", *code)
	}
	if len(rdims) != len(amounts) {
		return store.CancelResult{}, fmt.Errorf("pgstore: cancel: malformed result (%d dimensions, %d amounts)", len(rdims), len(amounts))
	}
	out := store.CancelResult{Cancelled: cancelled}
	for i := range rdims {
		out.Returned = append(out.Returned, store.Returned{Dimension: rdims[i], Amount: amounts[i]})
	}
	return out, nil
}

// Dequeue implements store.Queuer in one call of the dequeue function,
// which locks the concurrent buckets named, in name order, and deletes
// req.ID's tickets from their queues.
func (s *Store) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.q.dequeue, req.Dimensions, uuidOf(req.ID), s.now(req.Now)); err != nil {
		return fail("dequeue", err)
	}
	return nil
}
