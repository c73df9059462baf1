package sluice

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ontopix/sluice/store"
)

// releaseTimeout bounds the Release that WithSlot and SlotHandle run after
// the caller's context may already be done.
const releaseTimeout = 10 * time.Second

// Wait acquires reqs, all-or-nothing, waiting until they are granted or
// the wait's bound passes, and returns the lease; the caller releases it.
// The bound is ctx's deadline; when ctx has none, it is
// Config.DefaultSlotTimeout from now, by the client's Clock. A Request's
// Cost must be at least 1.
//
// Wait waits in line, first come, first served: requests and tokens
// dimensions are reserved in one store call and Wait sleeps until the
// reservation is valid, reading the buckets again at that instant (and
// every Config.PollInterval before it) so that leases settled meanwhile
// move it: later for usage above their estimates, sooner for refunds
// (see docs/architecture.md, "Waiting in line"); concurrent dimensions
// are waited for with a ticket in the store's waiter queue, and a release
// in this process can hand its lease over to the wait at its turn (see
// Lease.Release). When the store answers that the wait ends past the
// bound, Wait returns a *SlotTimeoutError at once and reserves nothing.
// If ctx is cancelled while Wait sleeps, the reservation is cancelled
// (its tokens go back to the bucket, less what later reservations relied
// on) and the ticket removed. With WithPolling it waits out RETRY_IN answers (plus jitter)
// instead, and times out only when the bound has passed. A wait that
// reaches its bound without a slot returns a *SlotTimeoutError, which
// also matches the context's error when the bound was ctx's deadline.
// Errors other than a denial end the wait at once.
func (c *Client) Wait(ctx context.Context, reqs []Request, opts ...AcquireOption) (*Lease, error) {
	w := new(waitCall)
	for _, f := range opts {
		f(&w.o)
	}
	if err := checkRequests(reqs); err != nil {
		return nil, err
	}
	w.items = append([]Request(nil), reqs...)
	return c.wait(ctx, w)
}

// checkRequests validates the requests of AcquireMany and Wait: 1 to
// store.MaxItems of them, each costing at least 1 token.
func checkRequests(reqs []Request) error {
	if len(reqs) == 0 {
		return invalid("requests", 0, "an acquisition needs at least one dimension")
	}
	if len(reqs) > store.MaxItems {
		return invalid("requests", len(reqs), "at most 16 dimensions per acquisition")
	}
	for _, r := range reqs {
		if r.Cost < 1 {
			return invalid("cost["+r.Dimension+"]", r.Cost, "must be at least 1 token")
		}
	}
	return nil
}

func (c *Client) wait(ctx context.Context, w *waitCall) (*Lease, error) {
	w.dims = make([]string, len(w.items))
	for i, it := range w.items {
		w.dims[i] = it.Dimension
	}
	if n := w.o.attempts; n != nil {
		defer func() { *n = w.attempts }()
	}
	if c.obs == nil || c.obs.Waited == nil {
		return c.waitLoop(ctx, w)
	}
	start := time.Now()
	l, err := c.waitLoop(ctx, w)
	reqs := make([]Request, len(w.dims))
	for i, d := range w.dims {
		reqs[i].Dimension = d
	}
	if l != nil {
		reqs = l.Dimensions()
	}
	c.obs.Waited(ctx, WaitEvent{
		Dimensions: reqs, Caller: c.callerOf(&w.o), Waited: time.Since(start), Attempts: w.attempts,
		Granted: l != nil, TimedOut: errors.Is(err, ErrSlotTimeout), Err: err,
	})
	return l, err
}

// waitLoop sets the wait's bound and runs the wait. A wait bounded by
// ctx's deadline that ends because the deadline passed (its timer fired,
// or a store call reported it first) ends with a *SlotTimeoutError, as
// one bounded by Config.DefaultSlotTimeout does; a cancelled one ends with
// the error the cancellation caused.
func (c *Client) waitLoop(ctx context.Context, w *waitCall) (*Lease, error) {
	d, bounded := ctx.Deadline()
	if bounded {
		w.timeout = time.Until(d)
	} else {
		w.timeout = c.cfg.DefaultSlotTimeout
		w.deadline = c.clock.Now().Add(w.timeout)
	}
	l, err := c.strategyLoop(ctx, w)
	if err != nil && bounded && callerDone(ctx) && ctx.Err() != context.Canceled && !errors.Is(err, ErrSlotTimeout) {
		return nil, c.expired(ctx, w, err)
	}
	return l, err
}

// jitter spreads retries of callers denied at the same moment: it adds up to
// 10% of d, at least 1 ms and at most 100 ms, so that waiting never ends
// before the exact RETRY_IN.
func jitter(d time.Duration) time.Duration {
	spread := min(max(d/10, time.Millisecond), 100*time.Millisecond)
	return d + rand.N(spread+1)
}

// SlotHandle is a held slot whose lease is renewed in the background until
// Release. Get one from Slot or SlotMany; WithSlot manages one for you, and
// vendors/transport holds each call's lease with one.
//
// If renewals keep failing, whatever the error, the handle's context is
// cancelled with cause ErrLeaseLost before the lease expires (see
// LossMargin): by the time another holder can have been granted the slot,
// this one has been told to stop.
type SlotHandle struct {
	c      *Client
	lease  *Lease
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	err    error
}

// Slot waits for one slot on dimension (see Wait) at its cost per call, or
// at the cost given with WithCost, and returns a handle that renews the
// lease while held. The caller must call Release.
func (c *Client) Slot(ctx context.Context, dimension string, opts ...AcquireOption) (*SlotHandle, error) {
	w := new(waitCall)
	for _, f := range opts {
		f(&w.o)
	}
	if w.o.costGiven && w.o.cost < 1 {
		return nil, invalid("cost["+dimension+"]", w.o.cost, "must be at least 1 token")
	}
	w.items = []Request{{Dimension: dimension, Cost: w.o.cost}}
	return c.hold(ctx, w)
}

// SlotMany is Slot over several dimensions, all-or-nothing; each Request
// carries its own cost (at least 1).
func (c *Client) SlotMany(ctx context.Context, reqs []Request, opts ...AcquireOption) (*SlotHandle, error) {
	w := new(waitCall)
	for _, f := range opts {
		f(&w.o)
	}
	if err := checkRequests(reqs); err != nil {
		return nil, err
	}
	w.items = append([]Request(nil), reqs...)
	return c.hold(ctx, w)
}

// hold runs w and returns a handle renewing its lease.
func (c *Client) hold(ctx context.Context, w *waitCall) (*SlotHandle, error) {
	l, err := c.wait(ctx, w)
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancelCause(ctx)
	h := &SlotHandle{c: c, lease: l, ctx: hctx, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{})}
	go h.renew(c)
	return h, nil
}

// Lease returns the held lease (for Adjust or Settle).
func (h *SlotHandle) Lease() *Lease { return h.lease }

// Context returns a context derived from the one passed to Slot that is
// cancelled, with cause ErrLeaseLost, if the lease expires or is reclaimed
// while held or could not be renewed in time, and when the handle is
// released.
func (h *SlotHandle) Context() context.Context { return h.ctx }

// LossMargin returns how long before a lease's expiry a SlotHandle whose
// renewals keep failing gives the lease up: max(TTL/10, min(1s, TTL/4)).
// The margin covers the latency of the last renewal and the disagreement
// between the holder's clock and the store's (or the reconciler's); it is
// at most a quarter of the TTL, so that a renewal every TTL/3 gets two
// chances before the lease is given up.
func LossMargin(ttl time.Duration) time.Duration {
	return max(ttl/10, min(time.Second, ttl/4))
}

// renew extends the lease every third of its TTL until Release. A lease
// that turns out expired or reclaimed cancels the handle's context with
// ErrLeaseLost at once; other errors are retried on the next tick, while
// watch cancels the context LossMargin before the expiry that the last
// successful renewal (or the grant) set.
func (h *SlotHandle) renew(c *Client) {
	defer close(h.done)
	// The granted TTL, not ExpiresAt-CreatedAt: those come from different
	// clocks when the store keeps its own.
	ttl := h.lease.TTL()
	every := max(ttl/3, time.Millisecond)
	stopWatch := h.watch(c, ttl)
	defer stopWatch()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-h.ctx.Done():
			return
		case <-t.C:
			// Bound each renewal by the renewal period: one that takes
			// longer is failing anyway, and Release must never wait on it.
			ectx, cancel := context.WithTimeout(h.ctx, every)
			err := h.lease.Extend(ectx, ttl)
			cancel()
			switch {
			case err == nil:
			case errors.Is(err, ErrLeaseExpired):
				h.lose(c, err)
				return
			case errors.Is(err, ErrLeaseReleased):
				return
			default:
				c.log.LogAttrs(h.ctx, slog.LevelWarn, "slot.renew_failed", slog.String("lease", h.lease.ID()), slog.String("error", err.Error()))
			}
		}
	}
}

// watch cancels the handle's context with ErrLeaseLost once the lease's
// expiry, by the client's clock, is less than LossMargin away. It runs on
// its own timer, so that a renewal or another operation stuck on the
// lease cannot delay it. The returned func stops it.
func (h *SlotHandle) watch(c *Client, ttl time.Duration) (stop func()) {
	margin := LossMargin(ttl)
	untilLost := func() time.Duration {
		return h.lease.holderExpiry().Add(-margin).Sub(c.clock.Now())
	}
	var (
		mu      sync.Mutex
		timer   *time.Timer
		stopped bool
	)
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped || h.ctx.Err() != nil {
			return
		}
		if left := untilLost(); left > 0 {
			timer.Reset(left)
			return
		}
		h.lose(c, errors.New("not renewed within "+(ttl-margin).String()+" of its last renewal"))
	}
	mu.Lock()
	timer = time.AfterFunc(untilLost(), check)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}

// lose cancels the handle's context with ErrLeaseLost.
func (h *SlotHandle) lose(c *Client, why error) {
	if h.ctx.Err() != nil {
		return
	}
	c.log.LogAttrs(h.ctx, slog.LevelWarn, "slot.lease_lost", slog.String("lease", h.lease.ID()), slog.String("error", why.Error()))
	if o := c.obs; o != nil && o.LeaseLost != nil {
		o.LeaseLost(h.ctx, LeaseLostEvent{Lease: h.lease.ID(), Cause: why})
	}
	h.cancel(ErrLeaseLost)
}

// Release stops renewal and releases the lease; it is idempotent and returns
// the first Release's error. It runs even if ctx is already done.
//
// If the store cannot be reached (an error matching ErrUnavailable),
// Release returns that error and keeps retrying in the background, with
// exponential backoff and jitter, until a release gets through or the lease
// expires (the reconciler reclaims it then), so that the slot comes back as
// soon as the store does. A release that finds no record is final.
func (h *SlotHandle) Release(ctx context.Context) error {
	h.once.Do(func() {
		close(h.stop)
		h.cancel(context.Canceled) // also interrupts a renewal in flight
		<-h.done
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		h.err = h.lease.Release(rctx)
		if errors.Is(h.err, ErrUnavailable) {
			h.c.log.LogAttrs(ctx, slog.LevelWarn, "slot.release_failed", slog.String("lease", h.lease.ID()),
				slog.String("error", h.err.Error()), slog.Bool("retrying", true))
			// The deadline is set now, on the runtime's timers, so that the
			// retries end at the lease's expiry whatever the Clock does.
			left := h.lease.holderExpiry().Sub(h.c.clock.Now())
			bctx, bcancel := context.WithTimeout(context.WithoutCancel(ctx), left)
			go h.retryRelease(bctx, bcancel)
		}
	})
	return h.err
}

// Backoff of the background release retries: exponential from 100 ms,
// capped at 5 s, with equal jitter.
const (
	releaseBackoffBase = 100 * time.Millisecond
	releaseBackoffCap  = 5 * time.Second
)

// retryRelease retries the lease's release until it gets through, finds
// no record, fails for another reason than the store's availability, or
// ctx (which ends at the lease's expiry) is done.
func (h *SlotHandle) retryRelease(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	for attempt := 0; ; attempt++ {
		if sleep(ctx, releaseDelay(attempt)) != nil {
			h.c.log.LogAttrs(ctx, slog.LevelWarn, "slot.release_abandoned", slog.String("lease", h.lease.ID()),
				slog.Int("attempts", attempt+1), slog.String("reason", "lease expired; the reconciler reclaims it"))
			return
		}
		err := h.lease.Release(ctx)
		if !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			return
		}
	}
}

// WithSlot waits for a slot on dimension (see Wait), runs fn with the lease,
// and always releases it, also when fn panics or returns an error. The lease
// is renewed while fn runs; fn's context is cancelled with ErrLeaseLost if
// it is lost or could not be renewed in time (see SlotHandle). It returns
// fn's error, else the release error (which matches ErrLeaseExpired if the
// lease was reclaimed while fn ran, and ErrUnavailable if the store could
// not be reached: the release is then retried in the background, see
// SlotHandle.Release).
//
// fn's context derives from ctx: a deadline given to bound the wait bounds
// fn too. To bound the wait alone, leave ctx without a deadline and set
// Config.DefaultSlotTimeout.
func (c *Client) WithSlot(ctx context.Context, dimension string, fn func(context.Context, *Lease) error, opts ...AcquireOption) error {
	h, err := c.Slot(ctx, dimension, opts...)
	if err != nil {
		return err
	}
	return h.run(ctx, fn)
}

// WithSlotMany is WithSlot over several dimensions, all-or-nothing.
func (c *Client) WithSlotMany(ctx context.Context, reqs []Request, fn func(context.Context, *Lease) error, opts ...AcquireOption) error {
	h, err := c.SlotMany(ctx, reqs, opts...)
	if err != nil {
		return err
	}
	return h.run(ctx, fn)
}

func (h *SlotHandle) run(ctx context.Context, fn func(context.Context, *Lease) error) (err error) {
	defer func() {
		if rerr := h.Release(ctx); err == nil {
			err = rerr
		}
	}()
	return fn(h.ctx, h.lease)
}
