package sluice

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Confirming a reservation at its valid instant.
//
// A reservation's valid instant is the one at which its buckets, debited
// by everything reserved before it, earn back its cost. A settlement made
// while it waits that lowers a balance (a charge above the estimate, a
// vendor's lower report, a penalty, a cooldown) lowers it at every later
// instant by the same amount, so the reservation must wait that amount's
// refill longer. Each bucket counts these changes (bucket.State.Charged);
// the reservation read the counters when it was made, and at its valid
// instant the client reads them again with one Peek. Debt settled in
// between moves the instant by bucket.ChargeDelay, and the client sleeps
// and confirms again, until a confirmation finds nothing new.

// awaitReservation sleeps until validAt, the valid instant of the granted
// reservation res, and confirms it; it returns the instant the
// reservation was found valid and whether it proceeds without a
// confirmation (FailOpen during an outage). When the wait moves past what
// the caller accepts, or ctx ends, or the confirmation fails under
// FailClosed, it cancels the reservation and returns the error.
func (c *Client) awaitReservation(ctx context.Context, w *waitCall, req *store.ReserveRequest, res *store.ReserveResult, validAt time.Time) (time.Time, bool, error) {
	recorded := make([]int64, len(res.Items))
	for i := range res.Items {
		recorded[i] = res.Items[i].Charged
	}
	dims := make([]string, len(req.Items))
	for i, it := range req.Items {
		dims[i] = it.Dimension
	}
	for {
		if d := validAt.Sub(c.clock.Now()); d > 0 {
			if err := sleep(ctx, d); err != nil {
				c.cancelReservation(ctx, req, res)
				return validAt, false, err
			}
		}
		delay, err := c.chargedSince(ctx, dims, recorded)
		switch {
		case err == nil:
		case c.cfg.FailurePolicy == FailOpen && !callerDone(ctx) && errors.Is(err, store.ErrUnavailable):
			// The store took the reservation's cost; its settlements since
			// cannot be read. Proceed as any grant during an outage does.
			c.event(ctx, slog.LevelWarn, "acquire.unconfirmed", req.Items, slog.String("error", err.Error()))
			return validAt, true, nil
		default:
			c.cancelReservation(ctx, req, res)
			return validAt, false, err
		}
		if delay == 0 {
			return validAt, false, nil
		}
		validAt = validAt.Add(delay)
		if left := c.left(ctx, w); validAt.Sub(c.clock.Now()) > left {
			// Debt settled while the reservation waited moves it past what
			// the caller accepts. The cancellation names the original valid
			// instant, the one the store knows: bucket.Unreserve then gives
			// back at most what reservations made later did not rely on, or,
			// once that instant has passed (as now), nothing at all. Keeping
			// the tokens consumed errs on the safe side: the bucket lends
			// nothing it may owe.
			w.retryIn = validAt.Sub(c.clock.Now())
			c.cancelReservation(ctx, req, res)
			return validAt, false, c.timeoutError(ctx, w)
		}
		c.event(ctx, slog.LevelDebug, "acquire.reservation_delayed", req.Items, slog.Duration("delay", delay))
	}
}

// chargedSince reads the settlement counters of dims and returns how much
// longer a reservation that read recorded must wait: the longest
// bucket.ChargeDelay over the buckets whose counter moved up since. It
// updates recorded to the counters read.
func (c *Client) chargedSince(ctx context.Context, dims []string, recorded []int64) (time.Duration, error) {
	req := store.PeekRequest{Dimensions: dims}
	states, err := storeCall(ctx, c, "peek", func(ctx context.Context) ([]store.BucketState, error) {
		req.Now = c.clock.Now()
		return c.st.Peek(ctx, req)
	})
	if err != nil {
		return 0, err
	}
	var delay int64
	for i, d := range dims {
		for _, s := range states {
			if s.Name != d {
				continue
			}
			if extra := bucket.ChargedSince(recorded[i], s.Charged); extra > 0 {
				delay = max(delay, bucket.ChargeDelay(s.Config.Limits(), extra))
			}
			recorded[i] = s.Charged
			break
		}
	}
	return time.Duration(delay) * time.Millisecond, nil
}
