package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// Lease is a granted acquisition. Release it when the vendor call is done
// (WithSlot does this for you). Its methods are safe for concurrent use.
type Lease struct {
	c        *Client
	id       store.LeaseID
	recorded bool
	degraded bool
	caller   string

	mu        sync.Mutex
	items     []Request // current costs (tokens); Adjust updates them
	buf       [4]Request
	createdAt time.Time
	// heldFrom is when this holder got the lease: createdAt, but for a
	// lease handed over (see handOver), the hand-over.
	heldFrom time.Time
	// chainFrom is when the store granted the lease, kept across
	// hand-overs: a chain of them ends one TTL after it (see handOver).
	chainFrom time.Time
	// lost is, for a degraded lease, the acquisition whose answer was
	// lost (lostErr) under the same id: the store may have granted it, and
	// its release starts when this lease is released (see unknown.go).
	lost      *store.AcquireRequest
	lostErr   error
	expiresAt time.Time // the store's expiry (its clock)
	ttl       time.Duration
	// localExpiry is the expiry by the client's clock, which decides for
	// unrecorded and degraded leases (the store's clock may differ).
	localExpiry time.Time
	// expiryNano is localExpiry in Unix nanoseconds, readable without mu
	// (a SlotHandle watches it while an operation holds mu).
	expiryNano atomic.Int64
	// charged marks, for a degraded lease, the items whose cost the store
	// has since been charged (by Adjust or Settle); nil otherwise.
	charged []bool
	// unsure is the last settlement whose outcome the store never
	// confirmed (its call failed with ErrUnavailable): the same
	// settlement asked again reuses its operation id, so that a store
	// which keeps operation ids applies it once (see store.OpWindow).
	unsure   unsureAdjust
	released bool
}

// init fills a zero Lease from a granted acquisition.
func (l *Lease) init(c *Client, req *store.AcquireRequest, res *store.AcquireResult) {
	l.c, l.id, l.recorded, l.caller = c, req.ID, res.Recorded, req.Caller
	l.createdAt, l.expiresAt = req.Now, res.ExpiresAt
	l.heldFrom, l.chainFrom = l.createdAt, l.createdAt
	l.ttl = req.TTL
	l.setLocalExpiry(req.Now.Add(req.TTL))
	if len(req.Items) <= len(l.buf) {
		l.items = l.buf[:len(req.Items)]
	} else {
		l.items = make([]Request, len(req.Items))
	}
	for i, it := range req.Items {
		cost := it.Cost
		if i < len(res.Items) {
			cost = res.Items[i].Cost // resolved cost per call
		}
		l.items[i] = Request{Dimension: it.Dimension, Cost: cost}
	}
}

// initReserved fills a zero Lease from a granted reservation that is
// valid at validAt by the client's clock: its TTL counts from then.
func (l *Lease) initReserved(c *Client, req *store.ReserveRequest, res *store.ReserveResult, validAt time.Time) {
	l.c, l.id, l.recorded, l.caller = c, req.ID, res.Recorded, req.Caller
	l.createdAt, l.expiresAt = validAt, res.ExpiresAt
	l.heldFrom, l.chainFrom = l.createdAt, l.createdAt
	l.ttl = req.TTL
	l.setLocalExpiry(validAt.Add(req.TTL))
	l.items = l.buf[:0]
	for i, it := range req.Items {
		cost := it.Cost
		if i < len(res.Items) {
			cost = res.Items[i].Cost
		}
		l.items = append(l.items, Request{Dimension: it.Dimension, Cost: cost})
	}
}

// ID returns the lease's id, a UUID.
func (l *Lease) ID() string { return l.id.String() }

// Recorded reports whether the store holds a record of the lease (always
// for concurrent dimensions, or when WithRecord was given).
func (l *Lease) Recorded() bool { return l.recorded }

// Degraded reports a lease granted without the store under FailOpen.
func (l *Lease) Degraded() bool { return l.degraded }

// Caller returns the caller name recorded on the lease.
func (l *Lease) Caller() string { return l.caller }

// CreatedAt returns when the lease was granted, by the client's clock: the
// start of the store call that granted it; for a lease that Wait reserved,
// the earliest instant the store can have made it valid (that call's start
// plus the wait it answered, plus any debt waited out since); for a lease
// handed over on a release (see Release), the previous holder's grant or
// last renewal. Its TTL counts from CreatedAt. The caller proceeds a
// little later, by the answer's latency.
func (l *Lease) CreatedAt() time.Time { return l.createdAt }

// ExpiresAt returns when the lease expires unless extended.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// holderExpiry returns the lease's expiry by the client's clock. It does
// not wait for an operation in flight on the lease.
func (l *Lease) holderExpiry() time.Time {
	return time.Unix(0, l.expiryNano.Load())
}

// setLocalExpiry sets localExpiry (and its copy, expiryNano); mu is held
// or the lease is not shared yet.
func (l *Lease) setLocalExpiry(t time.Time) {
	l.localExpiry = t
	l.expiryNano.Store(t.UnixNano())
}

// TTL returns the lifetime the lease was granted (and is renewed) with.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Dimensions returns the lease's dimensions with their current costs.
func (l *Lease) Dimensions() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Request(nil), l.items...)
}

// Cost returns the lease's current cost on dimension (0 if absent).
func (l *Lease) Cost(dimension string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, it := range l.items {
		if it.Dimension == dimension {
			return it.Cost
		}
	}
	return 0
}

// Release ends the lease. Concurrent dimensions get their cost back (never
// above capacity); requests and tokens stay consumed. Release is idempotent:
// a second call returns nil. If the store has no record of the lease —
// the reconciler reclaimed it after it expired, or the store lost it (a
// restart without persistence, a failover), which the client cannot tell
// apart — Release restores nothing and returns an error matching
// ErrLeaseExpired that names both causes.
// If the store cannot be reached the lease stays unreleased, so Release can
// be retried; the reconciler reclaims it after its TTL otherwise.
//
// A lease whose dimensions are all concurrent, released while a Wait of
// the same client is first in line for exactly its dimensions and costs
// (with the same caller and TTL, and no waiter of another client ahead of
// it), is handed over to that Wait instead: the slot changes holder
// without going back to the store, so it is never idle, and the store
// only removes the waiter's ticket. The waiter's lease has the same ID and
// record; its TTL counts from CreatedAt, the previous holder's grant or
// last renewal, at most a tenth of the TTL earlier (an older lease is
// extended first).
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	if !l.recorded || l.degraded {
		l.released = true
		if l.lost != nil {
			l.c.releaseUnknown(ctx, l.lost, l.lostErr)
			l.lost = nil
		}
		l.c.leaseEvent(ctx, "release.ok", l)
		l.c.released(ctx, l, false, nil)
		return nil
	}
	if l.handOver(ctx) {
		return nil
	}
	req := store.ReleaseRequest{Now: l.c.clock.Now(), ID: l.id, Hint: l.items[0].Dimension, Op: store.NewLeaseID()}
	res, err := storeCall(ctx, l.c, "release", func(ctx context.Context) (store.ReleaseResult, error) {
		req.Now = l.c.clock.Now()
		return l.c.st.Release(ctx, req)
	})
	if err != nil {
		l.c.released(ctx, l, false, err)
		return err
	}
	l.released = true
	l.c.releasedItems(l.items) // released: the items no longer change
	if !res.Released {
		err := &leaseError{id: l.id, op: "release", err: store.ErrLeaseExpired, why: whyGone + "; nothing was restored"}
		l.c.released(ctx, l, false, err)
		return err
	}
	l.c.leaseEvent(ctx, "release.ok", l)
	l.c.released(ctx, l, true, nil)
	return nil
}

// released reports a release of l to the observer.
func (c *Client) released(ctx context.Context, l *Lease, found bool, err error) {
	if o := c.obs; o != nil && o.Released != nil {
		o.Released(ctx, ReleaseEvent{Lease: l.ID(), Held: c.clock.Now().Sub(l.heldFrom), Recorded: l.recorded && !l.degraded, Released: found, Err: err})
	}
}

// Adjust settles the estimate on dimension by delta tokens: positive
// charges more (the balance may go into debt, at most the bucket's
// max debt deeper than it was; debt is never forgiven),
// negative refunds (at most what the lease holds on it). Concurrent
// dimensions cannot be adjusted.
//
// Usage reported after the lease expired still counts at the vendor, so a
// charge is applied whenever it comes, even once the reconciler has
// deleted the lease's record; a refund after expiry fails with
// ErrLeaseExpired.
func (l *Lease) Adjust(ctx context.Context, dimension string, delta int64) (Settlement, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, err := l.find(dimension)
	if err != nil {
		return Settlement{}, err
	}
	return l.adjustLocked(ctx, i, delta)
}

// Settle sets the lease's cost on dimension to actual tokens, charging or
// refunding the difference from the current cost: reserve an estimate,
// then Settle with the usage the vendor reported. As with Adjust, a Settle
// that charges more is applied even after the lease expired; one that
// refunds then fails with ErrLeaseExpired.
func (l *Lease) Settle(ctx context.Context, dimension string, actual int64) (Settlement, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, err := l.find(dimension)
	if err != nil {
		return Settlement{}, err
	}
	if actual < 0 {
		return Settlement{}, invalid("actual["+dimension+"]", actual, "must not be negative")
	}
	delta := actual - l.items[i].Cost
	if delta == 0 {
		return Settlement{Held: actual}, nil
	}
	return l.adjustLocked(ctx, i, delta)
}

func (l *Lease) find(dimension string) (int, error) {
	if l.released {
		return 0, &leaseError{id: l.id, op: "adjust", err: ErrLeaseReleased, why: "was released"}
	}
	for i, it := range l.items {
		if it.Dimension == dimension {
			return i, nil
		}
	}
	return 0, invalid("dimension", dimension, "is not part of lease "+l.id.String())
}

func (l *Lease) adjustLocked(ctx context.Context, i int, delta int64) (Settlement, error) {
	now := l.c.clock.Now()
	held := l.items[i].Cost
	if l.degraded && !l.charged[i] {
		// The store never charged this degraded grant: once it answers,
		// charge the whole settled cost, and never refund what it did not
		// take.
		cost := held + delta
		if cost < 0 {
			return Settlement{}, invalid("delta", delta, fmt.Sprintf("refunds %d tokens but the lease holds %d on %q", -delta, held, l.items[i].Dimension))
		}
		if cost == 0 {
			l.items[i].Cost, l.charged[i] = 0, true
			return Settlement{}, nil
		}
		held, delta = 0, cost
	}
	recorded := l.recorded && !l.degraded
	if !recorded && delta < 0 && !now.Before(l.localExpiry) {
		return Settlement{}, &leaseError{id: l.id, op: "adjust", err: store.ErrLeaseExpired, why: "expired at " + l.localExpiry.Format(time.RFC3339Nano) + "; a refund after expiry is refused"}
	}
	req := store.AdjustRequest{
		Now: now, ID: l.id, Recorded: recorded,
		Dimension: l.items[i].Dimension, Delta: delta, Held: held,
		Op: l.unsure.op(i, delta, held), // kept across retries: applied once
	}
	if !recorded {
		req.ExpiresAt = l.expiresAt
	}
	late := !now.Before(l.localExpiry)
	res, err := l.c.storeAdjust(ctx, req)
	if recorded && delta > 0 && (errors.Is(err, store.ErrUnknownLease) || errors.Is(err, store.ErrLeaseExpired)) {
		// Usage reported late still counts at the vendor: charge it even
		// though the lease expired or the reconciler deleted its record,
		// bounded by the cost this holder knows it held.
		req.Recorded, req.ExpiresAt = false, l.expiresAt
		late = true
		res, err = l.c.storeAdjust(ctx, req)
	}
	if errors.Is(err, store.ErrUnknownLease) {
		err = &leaseError{id: l.id, op: "adjust", err: store.ErrLeaseExpired, why: whyGone}
	}
	l.unsure.note(i, delta, held, req.Op, err)
	estimate := l.items[i].Cost
	l.c.settled(ctx, req.Dimension, l.caller, estimate, res, late, err)
	if err != nil {
		return Settlement{}, err
	}
	l.items[i].Cost = res.Held
	if l.degraded {
		l.charged[i] = true
	}
	return settlement(res), nil
}

func (c *Client) storeAdjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	res, err := storeCall(ctx, c, "adjust", func(ctx context.Context) (store.Settlement, error) {
		req.Now = c.clock.Now() // every attempt decides at its own time
		return c.st.Adjust(ctx, req)
	})
	if err == nil && req.Delta < 0 {
		c.freed(nil)                    // a refund: forget the predicted timeouts
		c.reserving.wake(req.Dimension) // and look again
	}
	return res, err
}

// settled logs a settlement that reached the store and reports it to the
// observer: estimate is the cost held before, res.Held the cost after.
func (c *Client) settled(ctx context.Context, dim, caller string, estimate int64, res store.Settlement, late bool, err error) {
	if o := c.obs; o != nil && o.Settled != nil {
		ev := SettleEvent{Dimension: dim, Caller: caller, Estimate: estimate, Actual: res.Held, Applied: res.Applied, Late: late, Err: err}
		if err != nil {
			ev.Actual = estimate
		}
		o.Settled(ctx, ev)
	}
	if err != nil || !c.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	c.log.LogAttrs(ctx, slog.LevelDebug, "settle", slog.String("dimension", dim),
		slog.Int64("estimate", estimate), slog.Int64("actual", res.Held),
		slog.Float64("applied", Millitokens(res.Applied).Tokens()), slog.Bool("late", late))
}

// Extend keeps the lease alive for ttl from now (the heartbeat for a long
// concurrent hold). It fails with ErrLeaseExpired if the lease already
// expired or was reclaimed: the slot may now belong to someone else.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return &leaseError{id: l.id, op: "extend", err: ErrLeaseReleased, why: "was released"}
	}
	return l.extendLocked(ctx, ttl)
}

// extendLocked is Extend on a lease not released; l.mu is held.
func (l *Lease) extendLocked(ctx context.Context, ttl time.Duration) error {
	now := l.c.clock.Now()
	if !l.recorded || l.degraded {
		if err := contract.TTL(ttl); err != nil {
			return err
		}
		if !now.Before(l.localExpiry) {
			return &leaseError{id: l.id, op: "extend", err: store.ErrLeaseExpired, why: "expired at " + l.localExpiry.Format(time.RFC3339Nano)}
		}
		l.expiresAt = l.expiresAt.Add(now.Add(ttl).Sub(l.localExpiry))
		l.setLocalExpiry(now.Add(ttl))
		return nil
	}
	req := store.ExtendRequest{Now: now, ID: l.id, TTL: ttl, Hint: l.items[0].Dimension}
	exp, err := storeCall(ctx, l.c, "extend", func(ctx context.Context) (time.Time, error) {
		return l.c.st.Extend(ctx, req)
	})
	if errors.Is(err, store.ErrUnknownLease) {
		return &leaseError{id: l.id, op: "extend", err: store.ErrLeaseExpired, why: whyGone}
	}
	if err != nil {
		return err
	}
	l.expiresAt = exp
	l.setLocalExpiry(now.Add(ttl))
	return nil
}

// leaseError wraps a lease sentinel with the lease id and what happened.
// whyGone says why a lease the client holds has no record in the store.
// The client cannot tell the two causes apart: the reconciler reclaims a
// record once it expired (by the store's clock), and a store that lost
// data (restarted without persistence, failed over to a replica that had
// not received the record) no longer has it, expired or not.
const whyGone = "has no record in the store: the reconciler reclaimed it after it expired, or the store lost it (a restart without persistence or a failover)"

type leaseError struct {
	id  store.LeaseID
	op  string
	err error
	why string
}

func (e *leaseError) Error() string {
	return "sluice: " + e.op + " lease " + e.id.String() + ": " + e.why + ": " + e.err.Error()
}

func (e *leaseError) Unwrap() error { return e.err }

// unsureAdjust remembers a settlement whose outcome is unknown: the store
// may have applied it although its answer never arrived.
type unsureAdjust struct {
	set         bool
	item        int
	delta, held int64
	id          store.LeaseID
}

// op returns the operation id for a settlement of delta on item i holding
// held: the unconfirmed one's when it is the same settlement asked again,
// else a new one.
func (u *unsureAdjust) op(i int, delta, held int64) store.LeaseID {
	if u.set && u.item == i && u.delta == delta && u.held == held {
		return u.id
	}
	return store.NewLeaseID()
}

// note records the outcome of the settlement with operation id: an error
// matching ErrUnavailable leaves it unconfirmed; any answer confirms it.
func (u *unsureAdjust) note(i int, delta, held int64, id store.LeaseID, err error) {
	if err != nil && errors.Is(err, store.ErrUnavailable) {
		*u = unsureAdjust{set: true, item: i, delta: delta, held: held, id: id}
		return
	}
	*u = unsureAdjust{}
}
