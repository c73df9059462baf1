package sluice

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// A lease on concurrent dimensions only, released while a wait of the
// same client is next in line for exactly its items, goes to that wait
// without a store call: the store's record stays, under the same id, and
// only the holder changes. The slot is then never free, so no waiter
// anywhere could have been granted it, and the wait that gets it is the
// one the store would have served: the first of this client's waiters on
// every one of the lease's dimensions, with no ticket of another process
// ahead of it at its last answer. The releasing call then removes the
// new holder's tickets, which the store would have removed with a grant.
//
// What the store knows and the process does not bounds it. A waiter whose
// last answer showed a dimension over its capacity (lowered while its
// slots were held) gets no hand-over: the slot goes back to the store, as
// the holders over the new limit must. And a lease is handed on only
// within one TTL of its grant by the store, so that a chain of hand-overs
// outlives by at most that what the store last confirmed, where no answer
// shows it wrong: a lease of a bucket deleted and created again counts
// against none of the new bucket's slots.

// handOver hands l, being released, to the next waiter of this client
// when there is one to hand it to (see above), and reports that it did.
// A lease with less than nine tenths of its TTL left is extended first,
// so that the next holder gets most of a TTL; one with less than half
// (its renewals are failing) is never handed over. l.mu is held.
func (l *Lease) handOver(ctx context.Context) bool {
	c := l.c
	if !c.allConcurrent(l.items) {
		return false
	}
	now := c.clock.Now()
	left := l.localExpiry.Sub(now)
	if left < l.ttl/2 || now.Sub(l.chainFrom) >= l.ttl || c.handTarget(l) == nil {
		return false
	}
	if left < l.ttl-l.ttl/10 {
		if err := l.extendLocked(ctx, l.ttl); err != nil {
			return false // the release tells the caller what the store says
		}
	}
	next := l.successor()
	lw, heldBack := c.claim(l, next)
	if lw == nil {
		return false
	}
	l.released = true
	c.leaseEvent(ctx, "release.handed_over", l)
	c.released(ctx, l, true, nil)
	c.removeHanded(ctx, lw, heldBack)
	return true
}

// successor returns the lease l becomes for its next holder: the same
// record, whose TTL counts from l's grant or last renewal.
func (l *Lease) successor() *Lease {
	n := &Lease{c: l.c, id: l.id, recorded: true, caller: l.caller, ttl: l.ttl, chainFrom: l.chainFrom}
	n.createdAt, n.expiresAt = l.localExpiry.Add(-l.ttl), l.expiresAt
	n.heldFrom = l.c.clock.Now()
	n.setLocalExpiry(l.localExpiry)
	n.items = append(n.buf[:0], l.items...)
	return n
}

// allConcurrent reports that every one of items is a dimension found to
// be concurrent.
func (c *Client) allConcurrent(items []Request) bool {
	for _, it := range items {
		if _, ok := c.concurrent.Load(it.Dimension); !ok {
			return false
		}
	}
	return true
}

// handTarget returns the waiter l can be handed to, or nil. The caller
// holds l.mu; handTarget takes c.waiters.mu.
func (c *Client) handTarget(l *Lease) *localWaiter {
	c.waiters.mu.Lock()
	defer c.waiters.mu.Unlock()
	return c.handTargetLocked(l)
}

// handTargetLocked is handTarget; the caller holds c.waiters.mu. The
// target is the first waiter not yet handed a lease on each of l's
// dimensions, the same on all of them; asleep, with no ticket of another
// waiter than this client's ahead of its own at its last answer; asking
// for l's items at l's costs, with l's caller and TTL.
func (c *Client) handTargetLocked(l *Lease) *localWaiter {
	var lw *localWaiter
	for i, it := range l.items {
		var first *localWaiter
		for _, x := range c.waiters.byDim[it.Dimension] {
			if !x.taken {
				first = x
				break
			}
		}
		if first == nil || (i > 0 && first != lw) {
			return nil
		}
		lw = first
	}
	if lw == nil || !(lw.sleeping || lw.asking) || lw.remote != 0 || lw.over || lw.caller != l.caller || lw.ttl != l.ttl {
		return nil
	}
	if !slices.Equal(lw.costs, costsOf(l.items)) || len(lw.items) != len(l.items) {
		return nil
	}
	for i, it := range lw.items {
		if it.Dimension != l.items[i].Dimension {
			return nil
		}
	}
	return lw
}

// costsOf returns the costs of items, in order.
func costsOf(items []Request) []int64 {
	costs := make([]int64, len(items))
	for i, it := range items {
		costs[i] = it.Cost
	}
	return costs
}

// placeRemote takes in res, the store's denial of lw's ask (the caller
// holds c.waiters.mu): the costs it resolved, and how many tickets of
// other waiters than this client's can be ahead of lw's: the store's
// count less, on the dimension where they are fewest, this client's
// waiters certainly ahead and standing. A ticket's place is set by the
// ask that took it, so one placed before lw's first ask began is ahead of
// lw's; it stood when the store decided lw's latest ask if it could not
// have been removed before that ask ended (see standing). Counting too
// few of them only makes lw wait for the store. The count
// assumes what the store's order does: that tickets are placed on one
// clock, and stand until removed (a waiter that stalls past its ticket's
// life and takes a new place is counted at its first one).
func (c *Client) placeRemote(lw *localWaiter, res Result) {
	if len(res.Dimensions) == 0 {
		// Contention: the store answered nothing, of the line or the
		// costs.
		return
	}
	if lw.ticketed == 0 {
		c.waiters.seq++
		lw.ticketed = c.waiters.seq
	}
	lw.costs = lw.costs[:0]
	heldBack := false
	lw.over = false
	for _, d := range res.Dimensions {
		lw.costs = append(lw.costs, d.Cost)
		if d.Type == Concurrent && d.Remaining < 0 {
			lw.over = true // more held than the capacity
		}
		if d.Type == Concurrent && d.RetryIn > 0 && int64(d.Remaining) >= d.Cost*bucket.Milli {
			heldBack = true
		}
	}
	if heldBack {
		// Free units went to tickets ahead. One of a waiter handed a lease
		// may have held them back: if one was removed since lw asked, ask
		// again at once; if one is removed later, removeHanded wakes the
		// waiters.
		c.waiters.heldBack++
		if c.waiters.removed != lw.removed {
			select {
			case lw.wake <- struct{}{}:
			default:
			}
		}
	}
	local := -1
	for _, it := range lw.items {
		n := 0
		for _, x := range c.waiters.byDim[it.Dimension] {
			if x == lw {
				break
			}
			if x.ticketed != 0 && x.ticketed < lw.firstAsk && x.standing(lw.answerSeq) {
				n++
			}
		}
		if local < 0 || n < local {
			local = n
		}
	}
	// No ticket gets ahead of lw's once it is placed, so every answer's
	// count bounds the remote tickets ahead from then on: keep the least.
	// The bound holds too for the waiters whose tickets are ahead of lw's
	// on dimensions that lw's all are.
	r := res.ahead - local
	if local < 0 || r < 0 {
		return
	}
	for _, x := range c.waiters.byDim[lw.items[0].Dimension] {
		if x == lw {
			break
		}
		if x.ticketed != 0 && x.ticketed < lw.firstAsk && within(x.items, lw.items) {
			x.bound(r)
		}
	}
	lw.bound(r)
}

// claim hands next to l's target, if it still is one, wakes it, and
// returns it, with waitList.heldBack then; nil if there is none.
func (c *Client) claim(l, next *Lease) (*localWaiter, uint64) {
	c.waiters.mu.Lock()
	defer c.waiters.mu.Unlock()
	lw := c.handTargetLocked(l)
	if lw == nil {
		return nil, 0
	}
	c.waiters.seq++
	lw.handed, lw.sleeping, lw.taken, lw.goneSeq = next, false, true, c.waiters.seq
	for range lw.woken {
		// A release freed units for it, which it will not take now: the
		// next waiters take them.
		c.passWake(lw)
	}
	select {
	case lw.wake <- struct{}{}:
	default:
	}
	return lw, c.waiters.heldBack
}

// removeHanded removes the tickets of lw, which was handed a lease, as
// the store would have with a grant. A removal that fails is retried as
// an orphan's; the tickets expire meanwhile. A waiter here denied
// meanwhile with free units behind the tickets ahead of it (heldBack was
// the count at the hand-over) may have been denied behind lw's: the
// waiters are woken, as after any ticket's removal.
func (c *Client) removeHanded(ctx context.Context, lw *localWaiter, heldBack uint64) {
	dims := make([]string, len(lw.items))
	for i, it := range lw.items {
		dims[i] = it.Dimension
	}
	req := store.DequeueRequest{Now: c.clock.Now(), ID: lw.id, Dimensions: dims}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, err := storeCall(dctx, c, "dequeue", func(ctx context.Context) (struct{}, error) {
		req.Now = c.clock.Now()
		return struct{}{}, c.queue.Dequeue(ctx, req)
	})
	if err != nil {
		c.event(ctx, slog.LevelWarn, "slot.dequeue_failed", lw.items, slog.String("error", err.Error()))
		if !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrClosed) && !errors.Is(err, errors.ErrUnsupported) {
			c.orphaned(req)
		}
		return
	}
	c.waiters.mu.Lock()
	c.waiters.removed++
	woke := c.waiters.heldBack != heldBack
	c.recountLocked(lw.items)
	c.waiters.mu.Unlock()
	if woke {
		c.freed(lw.items)
	}
}

// within reports that every dimension of a is one of b's.
func within(a, b []store.Item) bool {
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y store.Item) bool { return y.Dimension == x.Dimension }) {
			return false
		}
	}
	return true
}

// bound takes in that at most r tickets of other clients are ahead of
// lw's.
func (lw *localWaiter) bound(r int) {
	if lw.remote < 0 || r < lw.remote {
		lw.remote = r
	}
}

// standing reports that lw's tickets cannot have been removed before
// waitList.seq was seq. Only a grant (in an ask), a hand-over and giving
// up remove a waiter's tickets, and each marks it taken, with goneSeq
// before the removal can begin; a waiter not taken whose ask in flight
// began after seq, or with none in flight (its asks were denied), has its
// tickets.
func (lw *localWaiter) standing(seq uint64) bool {
	if lw.taken {
		return lw.goneSeq > seq
	}
	return !lw.asking || lw.askSeq > seq
}

// recountLocked wakes the first waiter on items' first dimension when it
// does not know that no other client's ticket is ahead of its own: now
// that the tickets ahead of it are removed, its next answer tells, and a
// release here can then hand it a lease. The caller holds c.waiters.mu.
func (c *Client) recountLocked(items []store.Item) {
	for _, x := range c.waiters.byDim[items[0].Dimension] {
		if x.taken {
			continue
		}
		if x.remote != 0 && x.sleeping {
			select {
			case x.wake <- struct{}{}:
			default:
			}
		}
		return
	}
}

// asleep records that lw sleeps until its next ask, so that a release
// here can hand it a lease.
func (c *Client) asleep(lw *localWaiter) {
	c.waiters.mu.Lock()
	lw.sleeping = true
	c.waiters.mu.Unlock()
}

// answered records the end of lw's ask: it leaves when the ask was
// granted or failed.
func (c *Client) answered(lw *localWaiter, leaving bool) {
	c.waiters.mu.Lock()
	defer c.waiters.mu.Unlock()
	c.waiters.seq++
	lw.asking, lw.answerSeq = false, c.waiters.seq
	if leaving && !lw.taken {
		// A grant removed the tickets when the store decided the ask.
		lw.taken, lw.goneSeq = true, lw.askSeq
	}
}

// leave records that lw gives up, before its tickets are removed.
func (c *Client) leave(lw *localWaiter) {
	c.waiters.mu.Lock()
	defer c.waiters.mu.Unlock()
	c.waiters.seq++
	lw.taken, lw.goneSeq = true, c.waiters.seq
}

// awake records that lw woke and returns the lease handed to it, if any.
func (c *Client) awake(lw *localWaiter) *Lease {
	c.waiters.mu.Lock()
	lw.sleeping = false
	c.waiters.mu.Unlock()
	return c.takeHanded(lw)
}

// takeHanded returns the lease handed to lw, if any.
func (c *Client) takeHanded(lw *localWaiter) *Lease {
	c.waiters.mu.Lock()
	l := lw.handed
	lw.handed = nil
	if l != nil {
		select {
		case <-lw.wake: // the hand-over's (see claim)
		default:
		}
	}
	c.waiters.mu.Unlock()
	return l
}

// handedOver reports to the observer that a wait took l, handed over.
func (c *Client) handedOver(ctx context.Context, l *Lease) {
	if o := c.obs; o != nil && o.Acquired != nil {
		o.Acquired(ctx, AcquireEvent{Dimensions: l.Dimensions(), Caller: l.caller, Outcome: Granted, HandedOver: true})
	}
}

// handedAfterAsk returns the lease handed to lw while it asked, if any
// (nil otherwise). The ask's own outcome is undone in the background: a
// lease it was granted is released (or handed on), and the tickets it
// may have renewed after the hand-over removed them are removed. A lease
// handed to a wait whose ask failed because its context ended is passed
// on, and the wait ends with the ask's error.
func (c *Client) handedAfterAsk(ctx context.Context, lw *localWaiter, w *waitCall, res Result, err error) *Lease {
	l := c.takeHanded(lw)
	if l == nil {
		return nil
	}
	if err != nil && callerDone(ctx) {
		c.passOn(ctx, l)
		return nil
	}
	switch {
	case err == nil && res.Granted():
		go c.passOn(ctx, res.Lease)
	default:
		go c.dequeue(context.WithoutCancel(ctx), w, lw.id)
	}
	c.handedOver(ctx, l)
	return l
}

// passOn releases l, which its wait will not use (a lease handed to a
// wait that ended meanwhile, or granted to one handed another): the slot
// goes back to the store, or to the next waiter here.
func (c *Client) passOn(ctx context.Context, l *Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := l.Release(rctx); err != nil {
		c.log.LogAttrs(ctx, slog.LevelWarn, "slot.release_failed", slog.String("lease", l.ID()), slog.String("error", err.Error()))
	}
}
