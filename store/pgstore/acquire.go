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
	dims, costs := dimsBuf[:n], costsBuf[:n]
	for i, it := range req.Items {
		dims[i], costs[i] = it.Dimension, it.Cost
	}
	poll := req.Poll
	var (
		errCode, errDim             *string
		granted, recorded           *bool
		nowMs, retry, expires       *int64
		types                       []int16
		rcosts, caps, remain, waits []int64
		ahead                       *int32
	)
	err = s.pool.QueryRow(ctx, s.q.acquire, dims, costs, now, req.TTL.Milliseconds(), uuidOf(req.ID),
		req.Caller, req.Record, poll.Milliseconds(), s.skewMs(), req.Queue.Milliseconds()).
		Scan(&errCode, &errDim, &granted, &recorded, &nowMs, &retry, &types, &rcosts, &caps, &remain, &waits, &expires, &ahead)
	if undefinedFunction(err) && req.Queue == 0 {
		err = s.pool.QueryRow(ctx, s.q.acquire3, dims, costs, now, req.TTL.Milliseconds(), uuidOf(req.ID),
			req.Caller, req.Record, poll.Milliseconds(), s.skewMs()).
			Scan(&errCode, &errDim, &granted, &recorded, &nowMs, &retry, &types, &rcosts, &caps, &remain, &waits, &expires)
	}
	if err != nil {
		return fail("acquire", err)
	}
	if errCode != nil {
		return acquireError(req, *errCode, deref(errDim), rcosts, caps)
	}
	if len(types) != n || len(rcosts) != n || len(caps) != n || len(remain) != n || len(waits) != n || granted == nil || recorded == nil {
		return fmt.Errorf("pgstore: acquire: malformed result for %d items (schema older than this code? run Migrate)", n)
	}
	if cap(res.Items) >= n {
		res.Items = res.Items[:n]
	} else {
		res.Items = make([]store.ItemResult, n)
	}
	for i := range res.Items {
		res.Items[i] = store.ItemResult{
			Dimension: req.Items[i].Dimension, Type: bucket.LimitType(types[i]), Cost: rcosts[i],
			Capacity: caps[i], Remaining: remain[i], RetryIn: time.Duration(waits[i]) * time.Millisecond,
		}
	}
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
