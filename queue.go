package sluice

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// reaskInterval is how long the client answers a fail-fast wait from the
// store's last answer before asking the store again: a loop of waits that
// each time out at once costs at most one store call per interval and
// dimension set, and a refund, release or cancel made elsewhere is noticed
// within it.
const reaskInterval = 100 * time.Millisecond

// horizon is the store's last word on a set of dimensions: a request of
// costs (or more) cannot be granted before until; it said so at asked.
type horizon struct {
	until, asked time.Time
	costs        []int64
}

// horizonKey names the dimensions of items (one entry per set of
// dimensions, so the client remembers no more entries than its callers
// use sets).
func horizonKey(items []store.Item) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.Dimension)
		b.WriteByte(0)
	}
	return b.String()
}

// covers reports that h holds for items: each costs at least what the
// store's answer was about, so it cannot be granted sooner.
func (h *horizon) covers(items []store.Item) bool {
	if len(h.costs) != len(items) {
		return false
	}
	for i, it := range items {
		if it.Cost < h.costs[i] {
			return false
		}
	}
	return true
}

// predictTimeout reports that w would fail fast: less than reaskInterval
// ago the store answered that its items cannot be granted before an
// instant that lies beyond w's deadline. It sets w.retryIn to the wait
// left. It never predicts for a polling wait, which does not fail fast.
func (c *Client) predictTimeout(ctx context.Context, w *waitCall) bool {
	if w.o.polling {
		return false
	}
	key := horizonKey(w.items)
	v, ok := c.horizons.Load(key)
	if !ok {
		return false
	}
	h := v.(*horizon)
	now := c.clock.Now()
	if now.Sub(h.asked) >= reaskInterval || !h.until.After(now) || now.Before(h.asked) {
		c.horizons.CompareAndDelete(key, v)
		return false
	}
	left := c.left(ctx, w)
	if left <= 0 || !now.Add(left).Before(h.until) || !h.covers(w.items) {
		return false
	}
	w.retryIn, w.predicted = h.until.Sub(now), true
	return true
}

// rememberTimeout records the store's answer behind a fail-fast timeout
// of w: its items cannot be granted for w.retryIn from now.
func (c *Client) rememberTimeout(ctx context.Context, w *waitCall) {
	if w.predicted || w.retryIn <= 0 {
		return
	}
	left := c.left(ctx, w)
	if left <= 0 || w.retryIn <= left {
		return // a wait that ran out its timeout, not a fail-fast
	}
	now := c.clock.Now()
	costs := make([]int64, len(w.items))
	for i, it := range w.items {
		costs[i] = it.Cost
	}
	c.horizons.Store(horizonKey(w.items), &horizon{until: now.Add(w.retryIn), asked: now, costs: costs})
}

// localWaiter is a wait in this process queued for concurrent items: a
// release of one of them here wakes it at once.
type localWaiter struct {
	wake  chan struct{}
	items []store.Item
	// id is the wait's ticket id, above every earlier waiter's of this
	// client: tickets taken in the same millisecond are served in id
	// order, so the store serves this process's waiters in the order they
	// registered, the order freed wakes them in.
	id store.LeaseID
	// skip is how many notices of freed units (see remoteFreed) the waiter
	// lets pass before the one that may be its turn: the tickets ahead of
	// it that the free units do not cover, by its last answer, less the
	// notices since it asked. 0 until its first answer.
	skip int
	// asked is waitList.notices when the waiter last asked.
	asked uint64

	// What a releasing lease of this client needs to know to hand itself
	// over to the waiter (see handOver): its caller and TTL, and its
	// costs as the store resolved them at its last answer.
	caller string
	ttl    time.Duration
	costs  []int64
	// firstAsk, ticketed, askSeq and answerSeq are waitList.seq when the
	// waiter's first ask began, when its first answer placed its tickets,
	// and when its latest ask began and ended; goneSeq, once it is taken,
	// the latest before its tickets' removal can have begun. 0 before.
	firstAsk, ticketed, askSeq, answerSeq, goneSeq uint64
	// remote is how many tickets of other waiters than this client's are
	// ahead of its own, at most (see placeRemote); -1 when unknown.
	remote int
	// over reports that the waiter's last answer showed one of its
	// dimensions holding more than its capacity: no hand-over then.
	over bool
	// sleeping reports the waiter asleep between two asks: only then, or
	// while it asks, can a lease be handed to it (handed, which it takes
	// when it wakes, or when its ask returns).
	sleeping bool
	handed   *Lease
	// woken counts the wake-ups for freed units sent to the waiter since
	// its last ask: at most two, one taken and one pending.
	woken int
	// removed is waitList.removed when the waiter last asked.
	removed uint64
	// asking reports an ask in flight, which may remove the waiter's
	// tickets with a grant; taken, a waiter granted, handed a lease, or
	// giving up: its tickets are gone or going, and it is never woken nor
	// handed a lease.
	asking, taken bool
}

// waitList is the client's local waiters per concurrent dimension, in the
// order they started waiting.
type waitList struct {
	mu    sync.Mutex
	byDim map[string][]*localWaiter
	last  store.LeaseID // the latest waiter's id
	// notices counts the notices of freed units the client's watch got.
	notices uint64
	// seq orders the waiters' asks, answers, hand-overs and departures
	// (see localWaiter.firstAsk).
	seq uint64
	// heldBack counts the denials that found free units behind tickets
	// ahead, removed the removals of handed waiters' tickets (see
	// removeHanded).
	heldBack, removed uint64
}

// register adds a waiter for items, as caller with leases of ttl;
// unregister it when the wait ends.
func (c *Client) register(items []store.Item, caller string, ttl time.Duration) *localWaiter {
	lw := &localWaiter{wake: make(chan struct{}, 1), items: items, caller: caller, ttl: ttl, remote: -1}
	c.waiters.mu.Lock()
	defer c.waiters.mu.Unlock()
	lw.id = store.NewLeaseID()
	if bytes.Compare(lw.id[:], c.waiters.last[:]) <= 0 {
		// One above the latest: its random low bytes plus one (the
		// variant bits, at the top of byte 8, are never reached).
		lw.id = c.waiters.last
		binary.BigEndian.PutUint64(lw.id[8:], binary.BigEndian.Uint64(lw.id[8:])+1)
	}
	c.waiters.last = lw.id
	if c.waiters.byDim == nil {
		c.waiters.byDim = map[string][]*localWaiter{}
	}
	for _, it := range items {
		c.waiters.byDim[it.Dimension] = append(c.waiters.byDim[it.Dimension], lw)
	}
	return lw
}

// unregister removes lw. A wake-up it got but did not use (it was
// granted, or gave up, meanwhile) goes to the next waiters.
func (c *Client) unregister(lw *localWaiter) {
	c.waiters.mu.Lock()
	defer c.waiters.mu.Unlock()
	defer func() {
		select {
		case <-lw.wake:
			c.passWake(lw)
		default:
		}
	}()
	for _, it := range lw.items {
		ws := c.waiters.byDim[it.Dimension]
		for i, x := range ws {
			if x == lw {
				ws = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(c.waiters.byDim, it.Dimension)
		} else {
			c.waiters.byDim[it.Dimension] = ws
		}
	}
}

// passWake passes on a wake-up lw got for units freed on its dimensions
// but will not use: the waiters those units may serve are woken instead
// (lw itself no longer, when it is taken). The caller holds
// c.waiters.mu.
func (c *Client) passWake(lw *localWaiter) {
	if c.watching() {
		c.wakeTurn(lw.items, false)
	} else {
		c.wakeLocked(lw.items)
	}
}

// freed tells the client that items went back to their buckets (a
// release, a refund, a cancel, a ticket removed, a reconcile): the local
// waiters they may serve are woken, oldest first and skipping those woken
// already, as many as the freed cost covers (a cost below 1 wakes every
// waiter on the dimension), and the predicted timeouts are forgotten.
func (c *Client) freed(items []store.Item) {
	c.horizons.Clear()
	c.waiters.mu.Lock()
	defer c.waiters.mu.Unlock()
	c.wakeLocked(items)
}

// wakeLocked wakes the local waiters items may serve (see freed); the
// caller holds c.waiters.mu.
func (c *Client) wakeLocked(items []store.Item) {
	for _, it := range items {
		budget := it.Cost
		for _, lw := range c.waiters.byDim[it.Dimension] {
			if lw.taken {
				continue
			}
			select {
			case lw.wake <- struct{}{}:
				lw.woken++
			default:
				continue // woken already, by an earlier release
			}
			if it.Cost < 1 {
				continue
			}
			if budget -= lw.cost(it.Dimension); budget <= 0 {
				break
			}
		}
	}
}

// wakeTurn wakes the local waiters on items' dimensions whose turn may
// have come (skip 0, see localWaiter.skip), skipping those woken already;
// with count, each of the others lets this notice pass (its skip drops
// by one). The caller holds c.waiters.mu.
func (c *Client) wakeTurn(items []store.Item, count bool) {
	for _, it := range items {
		for _, lw := range c.waiters.byDim[it.Dimension] {
			if lw.taken {
				continue
			}
			if lw.skip > 0 {
				if count {
					lw.skip--
				}
				continue
			}
			select {
			case lw.wake <- struct{}{}:
				lw.woken++
			default:
			}
		}
	}
}

// asking records that lw asks the store now (see placed).
func (c *Client) asking(lw *localWaiter) {
	c.waiters.mu.Lock()
	lw.asked = c.waiters.notices
	lw.asking, lw.woken = true, 0
	lw.removed = c.waiters.removed
	c.waiters.seq++
	lw.askSeq = c.waiters.seq
	if lw.firstAsk == 0 {
		lw.firstAsk = lw.askSeq
	}
	c.waiters.mu.Unlock()
}

// placed takes in res, the store's denial of lw's ask: while the client
// watches for the store's notices, lw lets pass the notices of freed
// units (see remoteFreed) until the tickets ahead of it that the free
// units do not cover can have been served, counting one unit per notice
// and per ticket, less the notices since it asked (which the answer may
// not reflect). A wake-up such a notice left it is dropped, since the
// count takes the notice in; one that is its turn is kept. Counting too
// few only makes it ask in vain; too many (a notice that freed several
// units, a ticket ahead that expired, a lost notice) delays it to its
// next poll, which is frontPoll near the front. Without a watch, nothing
// is counted and every wake-up is kept: a release in this process is then
// the only one.
func (c *Client) placed(lw *localWaiter, res Result) {
	watching := c.watching()
	var free int64
	for _, d := range res.Dimensions {
		if d.Type == Concurrent && d.Remaining > 0 {
			free = max(free, int64(d.Remaining)/bucket.Milli)
		}
	}
	c.waiters.mu.Lock()
	defer c.waiters.mu.Unlock()
	c.placeRemote(lw, res)
	if !watching {
		return
	}
	skip := int64(res.ahead) - free - int64(c.waiters.notices-lw.asked)
	lw.skip = int(max(skip, 0))
	if lw.skip > 0 {
		select {
		case <-lw.wake:
		default:
		}
	}
}

// cost returns lw's cost on dim, at least 1.
func (lw *localWaiter) cost(dim string) int64 {
	for _, it := range lw.items {
		if it.Dimension == dim {
			return max(it.Cost, 1)
		}
	}
	return 1
}

// sleepOrWake sleeps d, or until lw is woken, or ctx ends.
func sleepOrWake(ctx context.Context, d time.Duration, lw *localWaiter) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-lw.wake:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// frontPoll is how often a waiter near the front of its queues (the
// tickets ahead of it and its own cost fit in the dimension's capacity)
// asks again: a twentieth of the poll interval, from 5 ms. A slot freed
// by another process is then taken within about frontPoll, and only the
// waiters the slots can serve soon ask that often.
func (c *Client) frontPoll() time.Duration {
	return max(c.cfg.PollInterval/20, 5*time.Millisecond)
}

// nearFront reports that res, a queued denial, leaves the waiter near the
// front of every queue: its cost plus one token per ticket ahead fits in
// each concurrent dimension's capacity, so released slots may serve it.
func nearFront(res Result) bool {
	conc := false
	for _, d := range res.Dimensions {
		if d.Type == Concurrent {
			conc = true
			if int64(res.ahead)+d.Cost > d.Capacity {
				return false
			}
		}
	}
	return conc
}

// freedRestored is releasedItems for the concurrent items a release
// restored.
func (c *Client) freedRestored(rs []store.Restored) {
	items := make([]store.Item, len(rs))
	for i, r := range rs {
		items[i] = store.Item{Dimension: r.Dimension, Cost: r.Cost}
	}
	c.releasedItems(items)
}

// releasedItems tells the client that a release restored items. While
// the client watches for freed units, the store's notice of the release
// reaches this client too and counts it (see remoteFreed): the release
// itself wakes, without counting, the local waiters whose turn it may be,
// in case its answer comes before the notice. Otherwise it is freed.
func (c *Client) releasedItems(items []store.Item) {
	if !c.watching() {
		c.freed(items)
		return
	}
	c.horizons.Clear()
	c.waiters.mu.Lock()
	defer c.waiters.mu.Unlock()
	c.wakeTurn(items, false)
}

// maxOrphans bounds the tickets a client remembers it could not remove.
const maxOrphans = 1024

// orphanList is the tickets whose removal failed (the store was
// unreachable when their waiters gave up), to be removed once it answers
// again: until then they hold back their costs from the waiters behind
// them.
type orphanList struct {
	mu   sync.Mutex
	reqs []store.DequeueRequest
}

// orphaned remembers a failed removal; the oldest is dropped (and left to
// expire) beyond maxOrphans.
func (c *Client) orphaned(req store.DequeueRequest) {
	c.orphans.mu.Lock()
	defer c.orphans.mu.Unlock()
	if len(c.orphans.reqs) >= maxOrphans {
		c.orphans.reqs = c.orphans.reqs[1:]
	}
	c.orphans.reqs = append(c.orphans.reqs, req)
}

// removeOrphans retries the removals that failed, now that the store
// answered, until one fails again. It reports that every one succeeded.
func (c *Client) removeOrphans(ctx context.Context) bool {
	c.orphans.mu.Lock()
	reqs := c.orphans.reqs
	c.orphans.reqs = nil
	c.orphans.mu.Unlock()
	for i, req := range reqs {
		req.Now = c.clock.Now()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		_, err := storeCall(dctx, c, "dequeue", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, c.queue.Dequeue(ctx, req)
		})
		cancel()
		if err != nil {
			for _, r := range reqs[i:] {
				c.orphaned(r)
			}
			return false
		}
	}
	return true
}

// hasOrphans reports tickets left to remove.
func (c *Client) hasOrphans() bool {
	c.orphans.mu.Lock()
	defer c.orphans.mu.Unlock()
	return len(c.orphans.reqs) > 0
}
