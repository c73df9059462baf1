package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Acquire implements store.Store in one call of the acquire function.
// On a schema not yet at version 4 (the previous code's, during a rolling
// upgrade) a request without a queue takes a second round trip, to the
// version-3 function, which knows no queues; one with a queue fails with
// the error that says to migrate.
func (s *Store) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	now := s.now(req.Now)
	n := len(req.Items)
	var dimsBuf [store.MaxItems]string
	var costsBuf [store.MaxItems]int64
	dims, costs := itemArgs(req.Items, dimsBuf[:n], costsBuf[:n])
	poll := req.Poll
	var (
		errCode, errDim       *string
		granted, recorded     *bool
		nowMs, retry, expires *int64
		col                   itemColumns
		ahead                 *int32
	)
	err = s.pool.QueryRow(ctx, s.q.acquire, dims, costs, now, req.TTL.Milliseconds(), uuidOf(req.ID),
		req.Caller, req.Record, poll.Milliseconds(), s.skewMs(), req.Queue.Milliseconds()).
		Scan(&errCode, &errDim, &granted, &recorded, &nowMs, &retry, &col.types, &col.costs, &col.caps, &col.remain, &col.waits, &expires, &ahead)
	if undefinedFunction(err) && req.Queue == 0 {
		err = s.pool.QueryRow(ctx, s.q.acquire3, dims, costs, now, req.TTL.Milliseconds(), uuidOf(req.ID),
			req.Caller, req.Record, poll.Milliseconds(), s.skewMs()).
			Scan(&errCode, &errDim, &granted, &recorded, &nowMs, &retry, &col.types, &col.costs, &col.caps, &col.remain, &col.waits, &expires)
	}
	if err != nil {
		return fail("acquire", err)
	}
	if errCode != nil {
		return acquireError(req, *errCode, deref(errDim), col.costs, col.caps)
	}
	if !col.complete(n) || granted == nil || recorded == nil {
		return fmt.Errorf("pgstore: acquire: malformed result for %d items (schema older than this code? run Migrate)", n)
	}
	res.Items = col.results(req.Items, res.Items)
	res.Granted, res.Recorded = *granted, *recorded
	res.RetryIn, res.ExpiresAt, res.Ahead, res.Behind = 0, time.Time{}, 0, 0
	if !res.Granted {
		res.RetryIn = time.Duration(*retry) * time.Millisecond
		res.Ahead = int(deref(ahead))
		// A denial's o_expires is the caller's lag when its clock was
		// refused (see migration 005), else NULL.
		res.Behind = time.Duration(deref(expires)) * time.Millisecond
		return nil
	}
	res.ExpiresAt = time.UnixMilli(*expires)
	return nil
}

// undefinedFunction reports whether err is PostgreSQL's undefined_function
// (42883): the schema predates the function called.
func undefinedFunction(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42883"
}

// itemArgs fills dims and costs, as long as items, with the items'
// dimensions and costs: the arrays the acquire and reserve functions take.
func itemArgs(items []store.Item, dims []string, costs []int64) ([]string, []int64) {
	for i, it := range items {
		dims[i], costs[i] = it.Dimension, it.Cost
	}
	return dims, costs
}

// itemColumns are the per-item result columns of the acquire and reserve
// functions, in request order.
type itemColumns struct {
	types                      []int16
	costs, caps, remain, waits []int64
}

// complete reports that every column has n entries.
func (c *itemColumns) complete(n int) bool {
	return len(c.types) == n && len(c.costs) == n && len(c.caps) == n && len(c.remain) == n && len(c.waits) == n
}

// results returns one store.ItemResult per item, in buf when it is large
// enough.
func (c *itemColumns) results(items []store.Item, buf []store.ItemResult) []store.ItemResult {
	n := len(items)
	if cap(buf) >= n {
		buf = buf[:n]
	} else {
		buf = make([]store.ItemResult, n)
	}
	for i := range buf {
		buf[i] = store.ItemResult{
			Dimension: items[i].Dimension, Type: bucket.LimitType(c.types[i]), Cost: c.costs[i],
			Capacity: c.caps[i], Remaining: c.remain[i], RetryIn: time.Duration(c.waits[i]) * time.Millisecond,
		}
	}
	return buf
}
