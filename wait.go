package sluice

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ontopix/sluice/store"
)

// waitCall is one Wait: what it asks for and how it went.
type waitCall struct {
	dims  []string
	items []Request // costs in tokens; 0 means the cost per call
	o     acquireOptions
	// timeout is how long the wait may last: until ctx's deadline, else
	// Config.DefaultSlotTimeout.
	timeout time.Duration
	// deadline is the end of Config.DefaultSlotTimeout by the client's
	// clock, for a context without a deadline.
	deadline time.Time
	attempts int
	// retryIn is the last wait the store answered.
	retryIn time.Duration
	// predicted reports a fail-fast answered from the store's last word,
	// without asking it (see predictTimeout).
	predicted bool
}

// queueTTL is the life of a waiter's ticket: three poll intervals, but no
// longer than a lease's TTL, from 30 ms to store.MaxQueueTTL. A waiter
// renews it every third of that, so a live waiter keeps its place through
// one lost renewal, and a dead one (crashed, or cut off from the store)
// blocks the queue for at most this long: never longer than a dead holder
// keeps its slot.
func (c *Client) queueTTL() time.Duration {
	return min(max(min(3*c.cfg.PollInterval, c.cfg.LeaseTTL), 30*time.Millisecond), store.MaxQueueTTL)
}

// strategyLoop runs w waiting in line, or polling when the call asked for
// it (WithPolling) or the store cannot reserve.
func (c *Client) strategyLoop(ctx context.Context, w *waitCall) (*Lease, error) {
	if c.predictTimeout(ctx, w) {
		return nil, c.timeoutError(ctx, w)
	}
	if w.o.polling || c.noReserve.Load() {
		return c.pollLoop(ctx, w)
	}
	return c.reserveLoop(ctx, w)
}

// attempt makes one acquisition of w's items with options o.
func (c *Client) attempt(ctx context.Context, w *waitCall, o *acquireOptions) (Result, error) {
	a := new(acquisition)
	a.opts = *o
	return c.acquire(ctx, a, append(a.items[:0], w.items...), &a.opts)
}

// pollLoop waits out RETRY_IN answers, plus jitter, until a grant or the
// timeout. It asks nothing once the context's deadline has passed.
func (c *Client) pollLoop(ctx context.Context, w *waitCall) (*Lease, error) {
	for {
		w.attempts++
		res, err := c.attempt(ctx, w, &w.o)
		if err != nil {
			return nil, err
		}
		if res.Granted() {
			return res.Lease, nil
		}
		w.retryIn = res.RetryIn
		left := c.left(ctx, w)
		if left <= 0 {
			return nil, c.timeoutError(ctx, w)
		}
		err = sleep(ctx, min(jitter(res.RetryIn), left))
		if pastDeadline(ctx) {
			// The sleep ran to the caller's deadline, whichever the
			// runtime saw first (its timer or the context's): an answer
			// asked for now could not be used.
			return nil, c.timeoutError(ctx, w)
		}
		if err != nil {
			return nil, err
		}
	}
}

// pastDeadline reports that ctx has a deadline and it has passed, by its
// timer or by the clock, unless the caller cancelled ctx first.
func pastDeadline(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok && callerDone(ctx) && !errors.Is(ctx.Err(), context.Canceled)
}

// left returns how long w may still wait: until the context's deadline,
// by the runtime's clock, or when it has none until w.deadline, by the
// client's.
func (c *Client) left(ctx context.Context, w *waitCall) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return w.deadline.Sub(c.clock.Now())
}

// reserveLoop reserves w's items, or queues for them when one is
// concurrent.
func (c *Client) reserveLoop(ctx context.Context, w *waitCall) (*Lease, error) {
	for attempt := 0; ; attempt++ {
		if c.anyConcurrent(w.items) {
			return c.queueLoop(ctx, w)
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		left := c.left(ctx, w)
		if left <= 0 {
			return nil, c.timeoutError(ctx, w)
		}
		maxWait := min(left.Truncate(time.Millisecond), store.MaxReserveWait)
		w.attempts++
		l, wait, err := c.reserve(ctx, w, maxWait)
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			// A store without reservations: poll, from now on.
			w.attempts--
			c.noReserve.Store(true)
			return c.pollLoop(ctx, w)
		case c.notReservable(w, err):
			// A concurrent dimension: wait in its queue instead. The
			// refusal was no acquisition attempt.
			w.attempts--
			return c.queueLoop(ctx, w)
		case errors.Is(err, store.ErrContention):
			wait = backoff(attempt)
		case err != nil:
			return nil, err
		case l != nil:
			return l, nil
		case wait > left || (wait > maxWait && maxWait < store.MaxReserveWait):
			// Fail fast: the wait is longer than the caller accepts.
			w.retryIn = wait
			return nil, c.timeoutError(ctx, w)
		case wait > maxWait:
			// A timeout above store.MaxReserveWait: come back when the wait
			// fits in one reservation.
			wait -= maxWait
		}
		// A debt bound (bucket.MinBalance) or contention: ask again later.
		w.retryIn = wait
		if err := sleep(ctx, min(wait, left)); err != nil {
			return nil, err
		}
	}
}

// reserve makes one reservation of w's items that waits at most maxWait.
// Granted, it sleeps until the reservation is valid and returns the
// lease; the reservation is cancelled if ctx ends first. Denied, it
// returns the store's wait.
func (c *Client) reserve(ctx context.Context, w *waitCall, maxWait time.Duration) (*Lease, time.Duration, error) {
	o := &w.o
	req := &store.ReserveRequest{
		Items: w.items, ID: store.NewLeaseID(), Caller: c.callerOf(o), TTL: c.ttlOf(o),
		MaxWait: maxWait, Record: o.record, Op: store.NewLeaseID(),
	}
	res := new(store.ReserveResult)
	start := time.Now()
	_, err := storeCallExpect(ctx, c, "reserve", func(ctx context.Context) (struct{}, error) {
		req.Now = c.clock.Now()
		return struct{}{}, c.queue.Reserve(ctx, req, res)
	}, func(err error) bool { return c.notReservable(w, err) || errors.Is(err, errors.ErrUnsupported) })
	switch {
	case err == nil:
	case errors.Is(err, store.ErrUnavailable) && c.cfg.FailurePolicy == FailOpen && !callerDone(ctx):
		a := new(acquisition)
		a.req = store.AcquireRequest{Now: req.Now, Items: append(a.items[:0], w.items...), ID: req.ID, Caller: req.Caller, TTL: req.TTL}
		r := c.degraded(ctx, a, err)
		c.reserved(ctx, req, res, true, start, nil)
		return r.Lease, 0, nil
	case callerDone(ctx) && !errors.Is(err, store.ErrInvalid):
		err = errors.Join(callerCause(ctx), err)
	}
	if c.notReservable(w, err) || errors.Is(err, errors.ErrUnsupported) {
		return nil, 0, err
	}
	c.reserved(ctx, req, res, false, start, err)
	if err == nil && !res.Granted {
		c.clockSkew(ctx, req.Items, res.Behind, res.Wait)
	}
	if err != nil || !res.Granted {
		return nil, res.Wait, err
	}
	// The wait counts from the store's decision. A store deciding at
	// req.Now (store.CallerClock) made the reservation valid at req.Now
	// plus the wait, whenever its answer arrives; another decided at its
	// own instant, after req.Now: counting the wait from the answer's
	// arrival starts the caller late by the answer's latency, never early.
	var delayed time.Duration
	proceed := c.clock.Now().Add(res.Wait)
	if c.callerClock {
		proceed = req.Now.Add(res.Wait)
	}
	degraded := false
	if res.Wait > 0 {
		first := proceed
		var err error
		if proceed, degraded, err = c.awaitReservation(ctx, w, req, res, proceed); err != nil {
			return nil, 0, err
		}
		// A refund can move the instant before the call (never before it:
		// the lease counts from the call's stamp at the earliest).
		delayed = max(proceed.Sub(first), -res.Wait)
	}
	// The lease counts from the earliest instant the store can have made
	// it valid, by this client's clock: the call's stamp plus the wait
	// (and any debt waited out since). The caller proceeds later, by the
	// answer's latency; its TTL counts from the earlier instant, as the
	// store's does.
	l := new(Lease)
	l.initReserved(c, req, res, req.Now.Add(res.Wait+delayed))
	if degraded {
		// The store took the reservation's cost: settle it as charged.
		l.degraded, l.charged = true, make([]bool, len(l.items))
		for i := range l.charged {
			l.charged[i] = true
		}
	}
	return l, res.Wait, nil
}

// reserved reports a reservation decision to the observer and the log.
func (c *Client) reserved(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult, degraded bool, start time.Time, err error) {
	if o := c.obs; o != nil && o.Acquired != nil {
		ev := AcquireEvent{Dimensions: req.Items, Caller: req.Caller, Degraded: degraded, Duration: time.Since(start), Err: err}
		switch {
		case err != nil:
		case degraded || res.Granted:
			ev.Outcome = Granted
		default:
			ev.Outcome, ev.RetryIn = RetryIn, res.Wait
		}
		if err == nil && !degraded {
			ev.Results = dimensionResults(nil, res.Items)
		}
		o.Acquired(ctx, ev)
	}
	if err == nil && !degraded && res.Granted {
		c.event(ctx, slog.LevelDebug, "acquire.reserved", req.Items, slog.Duration("wait", res.Wait), slog.Bool("recorded", res.Recorded))
	}
}

// cancelReservation gives back a reservation its waiter gave up on before
// it became valid. It runs even when ctx is done, bounded by
// releaseTimeout; a failure is logged, and the tokens stay consumed.
func (c *Client) cancelReservation(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) {
	creq := store.CancelRequest{Now: c.clock.Now(), ID: req.ID, Recorded: res.Recorded, Hint: req.Items[0].Dimension, Op: store.NewLeaseID()}
	if !res.Recorded {
		creq.Items = make([]store.Item, len(req.Items))
		for i, it := range req.Items {
			creq.Items[i] = store.Item{Dimension: it.Dimension, Cost: res.Items[i].Cost}
		}
		creq.ValidAt = res.ValidAt
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, err := storeCall(cctx, c, "cancel", func(ctx context.Context) (store.CancelResult, error) {
		creq.Now = c.clock.Now() // every attempt decides at its own time
		return c.queue.Cancel(ctx, creq)
	})
	if err != nil {
		c.event(ctx, slog.LevelWarn, "slot.cancel_failed", req.Items, slog.String("error", err.Error()))
		return
	}
	c.freed(nil) // tokens back: forget the predicted timeouts
	c.event(ctx, slog.LevelDebug, "slot.cancelled", req.Items)
}

// queueLoop waits for w's items in the waiter queues of its concurrent
// dimensions: every attempt takes or renews the ticket, at most a third of
// its life apart. A waiter near the front of its queues (see nearFront)
// asks every frontPoll with a ticket of frontQueueTTL, one further back
// at the store's hint with a ticket of queueTTL; a release of one of its
// dimensions in this process wakes it at once, or hands it the released
// lease (see handOver). With its concurrent slots
// covered, a time-based wait longer than the caller accepts fails at once.
// Giving up removes the tickets.
func (c *Client) queueLoop(ctx context.Context, w *waitCall) (*Lease, error) {
	o := w.o
	lw := c.register(w.items, c.callerOf(&o), c.ttlOf(&o))
	defer c.unregister(lw)
	c.watchBegin()
	defer c.watchEnd()
	o.id, o.queue = lw.id, c.queueTTL()
	for {
		w.attempts++
		c.asking(lw)
		res, err := c.attempt(ctx, w, &o)
		c.answered(lw, err != nil || res.Granted())
		if l := c.handedAfterAsk(ctx, lw, w, res, err); l != nil {
			return l, nil
		}
		if err != nil {
			c.dequeue(ctx, w, o.id)
			return nil, err
		}
		c.learn(res.Dimensions)
		flushed := !res.Degraded && c.hasOrphans() && c.removeOrphans(ctx)
		if res.Granted() {
			return res.Lease, nil
		}
		c.placed(lw, res)
		if flushed {
			continue // tickets ahead may be gone: ask again at once
		}
		w.retryIn = res.RetryIn
		left := c.left(ctx, w)
		if left <= 0 || (atHead(res.Dimensions) && res.RetryIn > left) {
			c.leave(lw)
			c.dequeue(ctx, w, o.id)
			return nil, c.timeoutError(ctx, w)
		}
		o.queue = c.queueTTL()
		d := jitter(res.RetryIn)
		if nearFront(res) {
			o.queue = c.frontQueueTTL()
			d = min(d, jitter(c.frontPoll()))
		}
		c.asleep(lw)
		err = sleepOrWake(ctx, min(d, max(o.queue/3, time.Millisecond), left), lw)
		if l := c.awake(lw); l != nil {
			// A release here handed it a lease, and removes the tickets.
			if err != nil {
				c.passOn(ctx, l)
				return nil, err
			}
			c.handedOver(ctx, l)
			return l, nil
		}
		if err != nil {
			c.leave(lw)
			c.dequeue(ctx, w, o.id)
			return nil, err
		}
	}
}

// frontQueueTTL is the ticket life of a waiter near the front of its
// queues: three frontPoll intervals, from 30 ms, at most queueTTL. A dead
// waiter's ticket there holds back its cost for at most this long.
func (c *Client) frontQueueTTL() time.Duration {
	return min(max(3*c.frontPoll(), 30*time.Millisecond), c.queueTTL())
}

// atHead reports a denial at the head of every queue with every
// concurrent slot free: only time-based dimensions were short, and their
// wait is exact.
func atHead(dims []DimensionResult) bool {
	conc := false
	for _, d := range dims {
		if d.Type == Concurrent {
			if d.RetryIn != 0 {
				return false
			}
			conc = true
		}
	}
	return conc
}

// dequeue removes the tickets id holds in w's queues. It runs even when
// ctx is done, bounded by releaseTimeout; a failure is logged, and the
// removal is retried after the next answer the store gives a waiter of
// this client (the tickets expire on their own meanwhile).
func (c *Client) dequeue(ctx context.Context, w *waitCall, id store.LeaseID) {
	req := store.DequeueRequest{Now: c.clock.Now(), ID: id, Dimensions: w.dims}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, err := storeCall(dctx, c, "dequeue", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.queue.Dequeue(ctx, req)
	})
	if err != nil {
		c.event(ctx, slog.LevelWarn, "slot.dequeue_failed", w.items, slog.String("error", err.Error()))
		if !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrClosed) && !errors.Is(err, errors.ErrUnsupported) {
			// Removed once the store answers again (removeOrphans).
			c.orphaned(req)
		}
		return
	}
	// The ticket held back its cost from the waiters behind it.
	c.freed(w.items)
}

// notReservable reports err as the store's refusal to reserve one of w's
// dimensions because it is concurrent (store.Bucket.CheckReservable).
func (c *Client) notReservable(w *waitCall, err error) bool {
	var fe *FieldError
	if err == nil || !errors.As(err, &fe) || fe.Field != "dimension" {
		return false
	}
	for _, d := range w.dims {
		if fe.Value == d {
			return true
		}
	}
	return false
}

// anyConcurrent reports that one of items is a dimension found to be
// concurrent.
func (c *Client) anyConcurrent(items []store.Item) bool {
	for _, it := range items {
		if _, ok := c.concurrent.Load(it.Dimension); ok {
			return true
		}
	}
	return false
}

// learn remembers which of dims are concurrent.
func (c *Client) learn(dims []DimensionResult) {
	for _, d := range dims {
		if d.Type == Concurrent {
			c.concurrent.Store(d.Dimension, true)
		} else {
			c.concurrent.Delete(d.Dimension)
		}
	}
}

// timeoutError logs and returns w's *SlotTimeoutError.
func (c *Client) timeoutError(ctx context.Context, w *waitCall) error {
	c.rememberTimeout(ctx, w)
	return c.expired(ctx, w, nil)
}

// expired logs and returns w's *SlotTimeoutError; err, when not nil, is
// how the wait ended at its bound (the context's deadline), and the
// error matches it too. A wait that reached the context's deadline
// without such an error matches the context's cause.
func (c *Client) expired(ctx context.Context, w *waitCall, err error) error {
	if _, ok := ctx.Deadline(); ok && err == nil && callerDone(ctx) && ctx.Err() != context.Canceled {
		err = callerCause(ctx)
	}
	if c.log.Enabled(ctx, slog.LevelWarn) {
		c.log.LogAttrs(ctx, slog.LevelWarn, "slot.timeout", slog.Any("dimensions", w.dims),
			slog.Duration("timeout", w.timeout), slog.Int("attempts", w.attempts), slog.Duration("retry_in", w.retryIn))
	}
	return &SlotTimeoutError{Dimensions: w.dims, Timeout: w.timeout, RetryIn: w.retryIn, Attempts: w.attempts, err: err}
}

// callerOf returns the caller name o gives, else the client's.
func (c *Client) callerOf(o *acquireOptions) string {
	if o.caller != "" {
		return o.caller
	}
	return c.cfg.Caller
}

// ttlOf returns the lease TTL o gives, else the client's.
func (c *Client) ttlOf(o *acquireOptions) time.Duration {
	if o.ttl != 0 {
		return o.ttl
	}
	return c.cfg.LeaseTTL
}
