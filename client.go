package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// Client acquires slots from a store; it is the one front door to a store
// for applications and tools alike. It is safe for concurrent use; create
// one per process and share it.
//
// Most callers should use WithSlot (or WithSlotMany), which waits for a
// slot, runs a function with the lease renewed in the background, and
// releases it. Slot and SlotMany do the same without the callback; Wait
// waits for a lease the caller releases; Acquire and AcquireMany make one
// attempt and answer GRANTED or RETRY_IN.
//
// A lease held by another process, or one that outlived its holder, is
// released by id with ReleaseLease. Reconcile recovers expired leases. Buckets,
// GetBucket, Peek and Leases list state; PutBucket, DeleteBucket and
// Penalize change buckets.
//
// Every request is validated once, here, before the store sees it; every
// store call is bounded by Config.OpTimeout and retried on contention with
// exponential backoff and jitter.
type Client struct {
	// st is the store behind the portable layer's checks (contract.Checked).
	st    store.Store
	cfg   Config
	clock Clock
	log   *slog.Logger
	obs   *Observer
	// inProcess reports a store that never blocks (store.InProcess): its
	// calls need no OpTimeout context.
	inProcess bool
	// callerClock reports a store that decides at each request's Now
	// (store.CallerClock): a reservation is valid at its Now plus its wait.
	callerClock bool
	// concurrent remembers the dimensions found to be concurrent (a
	// string key, a bool true), so that Wait queues for them at once
	// rather than trying a reservation first.
	concurrent sync.Map
	// queue, cooler and syncer are the store layer (st) as the store's
	// optional capabilities (store.Queuer, store.Cooler, store.Syncer),
	// found once by New; each is nil when the store lacks it (see
	// detect for the fallbacks).
	queue  store.Queuer
	cooler store.Cooler
	syncer store.Syncer
	// noReserve is set when the store cannot reserve: at New for a store
	// that is no store.Queuer, or once the store answered a reservation
	// with errors.ErrUnsupported (a wrapper over one). Wait polls then.
	noReserve atomic.Bool
	// declared lists the buckets WithBuckets declared, which the client
	// re-creates when the store has lost them.
	declared []Bucket
	// waiters are the waits in this process queued for concurrent
	// dimensions, woken by a release here (see Client.freed).
	waiters waitList
	// reserving are the reservations in this process waiting for their
	// valid instant, woken to look again by a refund here (see
	// awaitReservation).
	reserving reservingList
	// orphans are the tickets whose removal failed (see removeOrphans).
	orphans orphanList
	// horizons remembers, per set of items (a string key, a horizon),
	// the store's last fail-fast answer (see predictTimeout).
	horizons sync.Map
	// watch is the watch for slots freed by other processes (see
	// Client.Close).
	watch freedWatch
	// unknown runs the background releases of acquisitions whose outcome
	// the client does not know (see releaseUnknown); Close ends them.
	unknown unknownReleases
}

// Contention backoff of the original algorithm: exponential from 25 ms, capped at 200 ms,
// with jitter.
const (
	backoffBase = 25 * time.Millisecond
	backoffCap  = 200 * time.Millisecond
)

// New returns a client over st. It does not take ownership of st: closing
// the store is the caller's job. It finds st's optional capabilities once:
// without store.Queuer, Wait, Slot and WithSlot poll; without store.Cooler
// or store.Syncer, Cooldown and Sync return an error matching
// errors.ErrUnsupported.
func New(st store.Store, opts ...Option) (*Client, error) {
	if st == nil {
		return nil, invalid("store", nil, "must not be nil")
	}
	c := &Client{st: contract.Checked(st), cfg: DefaultConfig(), clock: SystemClock{}}
	for _, o := range opts {
		o(c)
	}
	if c.clock == nil {
		return nil, invalid("clock", nil, "must not be nil")
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	_, c.inProcess = contract.Unwrap(st).(store.InProcess)
	c.watch.w = freedWatcher(st)
	if cc, ok := contract.Unwrap(st).(store.CallerClock); ok {
		c.callerClock = cc.CallerClock()
	}
	if err := c.cfg.Validate(); err != nil {
		return nil, err
	}
	if err := c.declare(); err != nil {
		return nil, err
	}
	c.detect(contract.Unwrap(st))
	return c, nil
}

// detect finds the optional capabilities of raw, the store as given, once.
// Without store.Queuer, Wait, Slot and WithSlot poll (as with WithPolling):
// no reservation, no ticket in a waiter queue. Without store.Cooler,
// Cooldown and CooldownFor, and without store.Syncer, Sync, return an
// error matching errors.ErrUnsupported and change nothing.
func (c *Client) detect(raw store.Store) {
	if _, ok := raw.(store.Queuer); ok {
		c.queue = contract.AsQueuer(c.st)
	} else {
		c.noReserve.Store(true)
	}
	if _, ok := raw.(store.Cooler); ok {
		c.cooler = contract.AsCooler(c.st)
	}
	if _, ok := raw.(store.Syncer); ok {
		c.syncer = contract.AsSyncer(c.st)
	}
}

// Config returns the client's effective configuration.
func (c *Client) Config() Config { return c.cfg }

// Logger returns the client's structured logger (WithLogger), for
// packages built on the client that log alongside it.
func (c *Client) Logger() *slog.Logger { return c.log }

// Acquire asks for one slot on dimension at its cost per call, or at the
// cost given with WithCost. A denial is not an error: it is a Result with
// Outcome RetryIn and the exact wait.
func (c *Client) Acquire(ctx context.Context, dimension string, opts ...AcquireOption) (Result, error) {
	a := new(acquisition)
	o := &a.opts
	for _, f := range opts {
		f(o)
	}
	if o.cost < 0 || (o.cost == 0 && o.costGiven) {
		return Result{}, invalid("cost["+dimension+"]", o.cost, "must be at least 1 token")
	}
	a.items[0] = Request{Dimension: dimension, Cost: o.cost}
	return c.acquire(ctx, a, a.items[:1], o)
}

// AcquireMany asks for every request at once, all-or-nothing: either each
// dimension is debited and one lease covers them all, or nothing changes
// and RetryIn is the longest wait among the dimensions that were short.
func (c *Client) AcquireMany(ctx context.Context, reqs []Request, opts ...AcquireOption) (Result, error) {
	a := new(acquisition)
	o := &a.opts
	for _, f := range opts {
		f(o)
	}
	if err := checkRequests(reqs); err != nil {
		return Result{}, err
	}
	return c.acquire(ctx, a, append(a.items[:0], reqs...), o)
}

// acquisition holds everything one acquisition needs in a single
// allocation: the store request and result, their buffers, and the lease.
type acquisition struct {
	lease   Lease
	opts    acquireOptions
	req     store.AcquireRequest
	res     store.AcquireResult
	items   [4]store.Item
	results [4]store.ItemResult
	dims    [4]DimensionResult
}

func (c *Client) acquire(ctx context.Context, a *acquisition, items []store.Item, o *acquireOptions) (Result, error) {
	if c.obs == nil || c.obs.Acquired == nil {
		return c.decide(ctx, a, items, o)
	}
	start := time.Now()
	res, err := c.decide(ctx, a, items, o)
	c.obs.Acquired(ctx, AcquireEvent{
		Dimensions: items, Caller: c.callerOf(o), Outcome: res.Outcome, RetryIn: res.RetryIn, Results: res.Dimensions,
		Degraded: res.Degraded, Duration: time.Since(start), Err: err,
	})
	return res, err
}

// decide makes one acquisition: the store call, retried with backoff on
// contention, and the answer.
func (c *Client) decide(ctx context.Context, a *acquisition, items []store.Item, o *acquireOptions) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, context.Cause(ctx)
	}
	ttl := o.ttl
	if ttl == 0 {
		ttl = c.cfg.LeaseTTL
	}
	caller := o.caller
	if caller == "" {
		caller = c.cfg.Caller
	}
	id := o.id
	if id.IsZero() {
		id = store.NewLeaseID()
	}
	a.req = store.AcquireRequest{
		Items: items, ID: id, Caller: caller, TTL: ttl,
		Record: o.record, Poll: c.cfg.PollInterval, Queue: o.queue,
		Op: store.NewLeaseID(), // kept across retries: debited once
	}
	a.res.Items = a.results[:0]
	req, res := &a.req, &a.res
	for attempt := 0; ; attempt++ {
		req.Now = c.clock.Now()
		octx, cancel, bound := c.opContext(ctx)
		err := c.st.Acquire(octx, req, res)
		cancel()
		err = c.opError(ctx, "acquire", bound, err)
		if err != nil {
			c.storeFailed(ctx, "acquire", err)
		}
		switch {
		case err == nil:
		case errors.Is(err, store.ErrContention):
			wait := backoff(attempt)
			if attempt >= c.cfg.MaxRetries {
				c.event(ctx, slog.LevelDebug, "acquire.retry_in", items,
					slog.Duration("retry_in", wait), slog.String("reason", "contention"))
				return Result{Outcome: RetryIn, RetryIn: wait}, nil
			}
			c.event(ctx, slog.LevelInfo, "acquire.contention_retry", items,
				slog.Int("attempt", attempt+1), slog.Duration("backoff", wait))
			if err := sleep(ctx, wait); err != nil {
				return Result{}, err
			}
			continue
		case errors.Is(err, store.ErrUnavailable) && c.cfg.FailurePolicy == FailOpen && !callerDone(ctx):
			// Fail open only for the store's own failure: a caller whose
			// deadline passed or who cancelled gets that error, never an
			// uncounted grant. The store may have granted it all the same:
			// its lease stays counted while the degraded one is held, and
			// is released in the background, as when failing closed, once
			// the degraded lease is released.
			r := c.degraded(ctx, a, err)
			r.Lease.lost, r.Lease.lostErr = req, err
			return r, nil
		case callerDone(ctx):
			c.releaseUnknown(ctx, req, err)
			return Result{}, fmt.Errorf("sluice: acquire: %w (store: %w)", callerCause(ctx), err)
		default:
			c.releaseUnknown(ctx, req, err)
			return Result{}, err
		}
		c.releaseDeferred(ctx)
		dims := dimensionResults(a.dims[:0], res.Items)
		if !res.Granted {
			c.clockSkew(ctx, items, res.Behind, res.RetryIn)
			c.event(ctx, slog.LevelDebug, "acquire.retry_in", items, slog.Duration("retry_in", res.RetryIn))
			return Result{Outcome: RetryIn, RetryIn: res.RetryIn, Dimensions: dims, ahead: res.Ahead}, nil
		}
		l := &a.lease
		l.init(c, req, res)
		c.event(ctx, slog.LevelDebug, "acquire.granted", items, slog.Bool("recorded", res.Recorded))
		return Result{Outcome: Granted, Lease: l, Dimensions: dims}, nil
	}
}

// clockSkew logs, at warning level, a refusal because this process's clock
// is behind a bucket's refill timestamp by behind, more than the store's
// maximum skew (store.AcquireResult.Behind; nothing when 0): the call is
// retried once the clock has caught up, after retryIn, but a clock that
// keeps running behind delays every call.
func (c *Client) clockSkew(ctx context.Context, items []store.Item, behind, retryIn time.Duration) {
	if behind > 0 {
		c.event(ctx, slog.LevelWarn, "clock.skew", items, slog.Duration("behind", behind), slog.Duration("retry_in", retryIn))
	}
}

// errOpTimeout is the cause of a store call's context when
// Config.OpTimeout passed.
var errOpTimeout = errors.New("sluice: operation timeout")

// opContext bounds one store call by Config.OpTimeout. bound is the time
// the client cuts the call at, zero when the caller's own deadline comes
// first, OpTimeout is 0 or the store never blocks (store.InProcess): then
// the caller's deadline applies, and is reported as the caller's.
func (c *Client) opContext(ctx context.Context) (octx context.Context, cancel context.CancelFunc, bound time.Time) {
	if c.cfg.OpTimeout <= 0 || c.inProcess {
		return ctx, noCancel, time.Time{}
	}
	bound = time.Now().Add(c.cfg.OpTimeout)
	if d, ok := ctx.Deadline(); ok && !bound.Before(d) {
		return ctx, noCancel, time.Time{}
	}
	octx, cancel = context.WithDeadlineCause(ctx, bound, errOpTimeout)
	return octx, cancel, bound
}

func noCancel() {}

// opError returns err, the outcome of a store call bounded by opContext,
// as an error matching ErrUnavailable, and no longer matching
// context.DeadlineExceeded, if the client's bound cut the call. A store's
// definitive answer (a validation error, say) and a cut by the caller's
// own context are returned as they are.
func (c *Client) opError(ctx context.Context, op string, bound time.Time, err error) error {
	if err == nil || bound.IsZero() || ctx.Err() != nil || time.Now().Before(bound) {
		return err
	}
	if !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errOpTimeout) {
		return err
	}
	return fmt.Errorf("%w: %s: no answer within %s (OpTimeout): %v", store.ErrUnavailable, op, c.cfg.OpTimeout, err)
}

// storeCall runs one store operation bounded by Config.OpTimeout (see
// opContext and opError), retrying it with the contention backoff up to
// Config.MaxRetries times, and reports a failure to the observer.
func storeCall[T any](ctx context.Context, c *Client, op string, f func(context.Context) (T, error)) (T, error) {
	return storeCallExpect(ctx, c, op, f, nil)
}

// storeCallExpect is storeCall, except that an error expected reports
// true for is an answer the caller handles, not a store failure: it is
// returned without being reported to the observer.
func storeCallExpect[T any](ctx context.Context, c *Client, op string, f func(context.Context) (T, error), expected func(error) bool) (T, error) {
	for attempt := 0; ; attempt++ {
		octx, cancel, bound := c.opContext(ctx)
		v, err := f(octx)
		cancel()
		err = c.opError(ctx, op, bound, err)
		if err == nil {
			return v, nil
		}
		if expected != nil && expected(err) {
			return v, err
		}
		c.storeFailed(ctx, op, err)
		if !errors.Is(err, store.ErrContention) || attempt >= c.cfg.MaxRetries {
			return v, err
		}
		if serr := sleep(ctx, backoff(attempt)); serr != nil {
			return v, fmt.Errorf("sluice: %s: %w (store: %w)", op, serr, err)
		}
	}
}

// callerDone reports that the caller's context is done, or that its
// deadline passed even if its timer has not fired yet (a store may report
// the deadline first).
func callerDone(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// callerCause returns why the caller's context is done (see callerDone).
func callerCause(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// degraded grants without the store under FailOpen.
func (c *Client) degraded(ctx context.Context, a *acquisition, cause error) Result {
	a.res = store.AcquireResult{Granted: true, ExpiresAt: a.req.Now.Add(a.req.TTL), Items: a.results[:0]}
	l := &a.lease
	l.init(c, &a.req, &a.res)
	l.degraded = true
	l.charged = make([]bool, len(l.items))
	c.event(ctx, slog.LevelWarn, "acquire.degraded", a.req.Items, slog.String("error", cause.Error()))
	return Result{Outcome: Granted, Lease: l, Degraded: true}
}

// backoff returns the attempt's contention delay: exponential from 25 ms,
// capped at 200 ms, with equal jitter (half fixed, half random).
func backoff(attempt int) time.Duration {
	d := backoffCap
	if attempt < 4 {
		d = min(backoffCap, backoffBase<<attempt)
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// event logs one of the SDKs' events if the logger wants it.
func (c *Client) event(ctx context.Context, level slog.Level, msg string, items []store.Item, attrs ...slog.Attr) {
	if !c.log.Enabled(ctx, level) {
		return
	}
	dims := make([]string, len(items))
	for i, it := range items {
		dims[i] = it.Dimension
	}
	attrs = append(attrs, slog.Any("dimensions", dims))
	c.log.LogAttrs(ctx, level, msg, attrs...)
}
