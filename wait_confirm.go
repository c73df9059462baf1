package sluice

import (
	"context"
	"errors"
	"log/slog"
	"math/bits"
	"sync"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Confirming a reservation at its valid instant, and moving it.
//
// A reservation's valid instant is the one at which its buckets, debited
// by everything reserved before it, earn back its cost. A settlement made
// while it waits changes a balance at every later instant by the same
// amount: one that lowers it (a charge above the estimate, a vendor's
// lower report, a penalty, a cooldown) makes the reservation wait that
// amount's refill longer; one that raises it (a refund: the call used less
// than its estimate) lets it proceed that much sooner. Each bucket counts
// these changes (bucket.State.Charged); the reservation read the counters
// when it was made, and the client reads them again with one Peek at the
// valid instant, and, while the instant is more than a poll interval
// away, once every poll interval, and at once (at most every tenth of a
// poll interval) after a refund settled by this client. Each item's instant moves by its own
// bucket's net change (debt rounded up, refunds down); the reservation is
// valid when every item is, and an item whose bucket holds a balance of
// zero or more, every reservation paid, is valid already. A reservation
// proceeds only on a reading made at or after the instant it computes,
// so every settlement before it counts.

// awaitReservation sleeps until validAt, the valid instant of the granted
// reservation res, looking for settlements on the way (see above), and
// confirms it; it returns the instant the reservation was found valid and
// whether it proceeds without a confirmation (FailOpen during an outage).
// When the wait moves past what the caller accepts, or ctx ends, or the
// confirmation fails under FailClosed, it cancels the reservation and
// returns the error.
func (c *Client) awaitReservation(ctx context.Context, w *waitCall, req *store.ReserveRequest, res *store.ReserveResult, validAt time.Time) (time.Time, bool, error) {
	m := reservationMoves{at: validAt, recorded: make([]int64, len(res.Items)), dims: make([]string, len(req.Items))}
	for i := range res.Items {
		m.recorded[i] = res.Items[i].Charged
	}
	for i, it := range req.Items {
		m.dims[i] = it.Dimension
	}
	wake := c.reserving.add(m.dims)
	defer c.reserving.remove(m.dims, wake)
	var looked time.Time // the last look's start, by the runtime's clock
	for {
		reached := true // the sleep ends at the instant, not at a look
		if d := validAt.Sub(c.clock.Now()); d > 0 {
			step := min(d, c.cfg.PollInterval)
			woken, err := sleepOrRefund(ctx, step, wake, looked.Add(c.cfg.PollInterval/10))
			if err != nil {
				c.cancelReservation(ctx, req, res)
				return validAt, false, err
			}
			reached = step == d && !woken
		}
		looked = time.Now()
		look := c.clock.Now()
		next, err := c.settledSince(ctx, &m, look)
		if reached && validAt.After(look) {
			look = validAt // slept until the instant, by a clock that lags
		}
		switch {
		case err == nil:
		case !reached && !callerDone(ctx):
			// An early look: the confirmation at the instant decides.
			c.event(ctx, slog.LevelDebug, "acquire.look_failed", req.Items, slog.String("error", err.Error()))
			continue
		case c.cfg.FailurePolicy == FailOpen && !callerDone(ctx) && errors.Is(err, store.ErrUnavailable):
			// The store took the reservation's cost; its settlements since
			// cannot be read. Proceed as any grant during an outage does.
			c.event(ctx, slog.LevelWarn, "acquire.unconfirmed", req.Items, slog.String("error", err.Error()))
			return validAt, true, nil
		default:
			c.cancelReservation(ctx, req, res)
			return validAt, false, err
		}
		switch {
		case next.After(validAt):
			c.event(ctx, slog.LevelDebug, "acquire.reservation_delayed", req.Items, slog.Duration("delay", next.Sub(validAt)))
		case next.Before(validAt):
			c.event(ctx, slog.LevelDebug, "acquire.reservation_advanced", req.Items, slog.Duration("advance", validAt.Sub(next)))
		}
		validAt = next
		if !validAt.After(look) {
			return validAt, false, nil
		}
		if left := c.left(ctx, w); validAt.Sub(c.clock.Now()) > left {
			// Debt settled while the reservation waited moves it past what
			// the caller accepts. The cancellation names the original valid
			// instant, the one the store knows: bucket.Unreserve then gives
			// back at most what reservations made later did not rely on, or,
			// once that instant has passed, nothing at all. Keeping the
			// tokens consumed errs on the safe side: the bucket lends
			// nothing it may owe.
			w.retryIn = validAt.Sub(c.clock.Now())
			c.cancelReservation(ctx, req, res)
			return validAt, false, c.timeoutError(ctx, w)
		}
	}
}

// sleepOrRefund sleeps d, or until a refund here is signalled on wake
// (and at least until notBefore, which spaces the looks a refund
// prompts), or ctx ends. It reports whether a refund ended the sleep.
func sleepOrRefund(ctx context.Context, d time.Duration, wake <-chan struct{}, notBefore time.Time) (bool, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return false, nil
	case <-ctx.Done():
		return false, context.Cause(ctx)
	case <-wake:
	}
	if early := time.Until(notBefore); early > 0 {
		select {
		case <-t.C:
			return false, nil
		case <-time.After(early):
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
	}
	return true, nil
}

// reservingList is the client's reservations waiting for their valid
// instant, per dimension.
type reservingList struct {
	mu    sync.Mutex
	byDim map[string]map[chan struct{}]struct{}
}

// add registers a waiting reservation on dims and returns the channel a
// refund on one of them signals; remove it when the wait ends.
func (r *reservingList) add(dims []string) chan struct{} {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byDim == nil {
		r.byDim = map[string]map[chan struct{}]struct{}{}
	}
	for _, d := range dims {
		if r.byDim[d] == nil {
			r.byDim[d] = map[chan struct{}]struct{}{}
		}
		r.byDim[d][ch] = struct{}{}
	}
	return ch
}

// remove unregisters ch from dims.
func (r *reservingList) remove(dims []string, ch chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range dims {
		delete(r.byDim[d], ch)
		if len(r.byDim[d]) == 0 {
			delete(r.byDim, d)
		}
	}
}

// wake signals the reservations waiting on dim to look again.
func (r *reservingList) wake(dim string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch := range r.byDim[dim] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// reservationMoves is what a waiting reservation knows to move its valid
// instant: the instant the store gave (at, by the client's clock), its
// dimensions, and their settlement counters as read when it was made.
type reservationMoves struct {
	at       time.Time
	dims     []string
	recorded []int64
}

// settledSince reads the buckets of m's dimensions at look and returns
// the reservation's valid instant as their settlements since it was made
// move it: for each item, m.at moved by its bucket's net change (see
// moveBy), or no constraint at all when the bucket's balance at look is
// zero or more (every reservation on it paid) outside a cooldown and not
// ahead of look; the latest of these, or look when none constrains it.
func (c *Client) settledSince(ctx context.Context, m *reservationMoves, look time.Time) (time.Time, error) {
	req := store.PeekRequest{Dimensions: m.dims}
	states, err := storeCall(ctx, c, "peek", func(ctx context.Context) ([]store.BucketState, error) {
		req.Now = look
		return c.st.Peek(ctx, req)
	})
	if err != nil {
		return time.Time{}, err
	}
	now := look.UnixMilli()
	valid := look
	for i, d := range m.dims {
		at := m.at
		for _, s := range states {
			if s.Name != d {
				continue
			}
			if s.Tokens >= 0 && s.CooldownUntil <= now && s.LastRefill <= now {
				at = time.Time{} // paid: no constraint
				break
			}
			at = at.Add(moveBy(s.Config.Limits(), bucket.ChargedSince(m.recorded[i], s.Charged)))
			break
		}
		if at.After(valid) {
			valid = at
		}
	}
	return valid, nil
}

// moveBy returns how far a net change of net millitokens settled on a
// bucket with limits l moves a reservation's valid instant: later by the
// refill of a charge, rounded up to the millisecond (bucket.ChargeDelay),
// earlier by the refill of a refund, rounded down; nothing for a bucket
// that does not refill.
func moveBy(l bucket.Limits, net int64) time.Duration {
	if net >= 0 || l.Amount <= 0 {
		return time.Duration(bucket.ChargeDelay(l, net)) * time.Millisecond
	}
	hi, lo := bits.Mul64(uint64(-net), uint64(l.Period))
	if hi >= uint64(l.Amount) {
		return -time.Duration(bucket.MaxRetryMs) * time.Millisecond
	}
	q, _ := bits.Div64(hi, lo, uint64(l.Amount))
	return -time.Duration(min(q, uint64(bucket.MaxRetryMs))) * time.Millisecond
}
