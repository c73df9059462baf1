package storetest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// model is the reference model of the whole store.Store contract: the
// golden vectors are generated from it, and the model-based test runs it
// side by side with a store. It is written directly on the bucket functions
// and the store validation helpers (the contract), independently of any
// store implementation, and keeps everything in plain maps with no
// concurrency.
type model struct {
	base    int64
	prefix  string // lease labels are ids idFor(prefix+label), as the runner's
	skew    int64  // maximum clock skew in ms (store.DefaultMaxSkew)
	always  bool   // the store records every grant (Harness.AlwaysRecords)
	inc     int    // incarnations handed out so far
	buckets map[string]*mBucket
	leases  map[string]*mLease // by label; granted leases only
	// replayed reports that the last step was an acquisition answered as
	// the grant it was (a retry), which debits nothing.
	replayed bool
	// decided holds, after a granted acquisition, the decision time of
	// each item in request order (see bucket.Align); nil after any other
	// step.
	decided []int64
	// last is the answer of the last step, when it was resendable: a
	// resend of it is answered so, changing nothing.
	last *Expect
}

type mBucket struct {
	b     store.Bucket
	lim   bucket.Limits
	st    bucket.State
	inc   int            // incarnation: a re-created bucket gets a new one
	queue []store.Ticket // a concurrent bucket's waiter queue
}

type mLease struct {
	items    []store.Item // costs in tokens, updated by Adjust
	incs     []int        // the incarnation of each item's bucket at the grant
	record   bool         // a record exists in the store
	recorded bool         // the grant wrote a record
	created  int64
	expires  int64
	// A reservation's valid instant (0 for an acquisition's lease), and
	// whether a reservation without a record was cancelled already.
	validAt   int64
	cancelled bool
}

func newModel(base int64) *model {
	return &model{base: base, skew: store.DefaultMaxSkew.Milliseconds(), buckets: map[string]*mBucket{}, leases: map[string]*mLease{}}
}

// aligned returns b's state and the decision time for a caller at now
// (see bucket.Align): the refill timestamp for a caller behind it, which
// never moves backwards.
func (m *model) aligned(b *mBucket, now int64) (bucket.State, int64) {
	at, _ := bucket.Align(b.lim, b.st, now, m.skew)
	return b.st, at
}

// refuseBehind returns the refusal of an admission (Acquire, Reserve) of
// resolved on bs at now, and true, when now is more than the maximum skew
// behind the refill timestamp of one of the buckets: each such item waits
// bucket.SkewRetry, every other item 0, and nothing changes.
func (m *model) refuseBehind(bs []*mBucket, resolved []store.Item, now int64) (Expect, bool) {
	var e Expect
	refused := false
	for i, b := range bs {
		at, wait := bucket.Align(b.lim, b.st, now, m.skew)
		ie := ItemExpect{Dimension: b.b.Name, Cost: resolved[i].Cost, Remaining: bucket.Available(b.lim, b.st, at)}
		if wait > 0 {
			refused = true
			ie.RetryInMs = bucket.SkewRetry(b.lim, b.st, at, wait, resolved[i].Cost*bucket.Milli)
			e.RetryInMs = max(e.RetryInMs, ie.RetryInMs)
		}
		e.Items = append(e.Items, ie)
	}
	return e, refused
}

// live reports whether item i of l still belongs to the bucket of its
// name (the bucket was not deleted, or re-created, since the grant).
func (m *model) live(l *mLease, i int) (*mBucket, bool) {
	b := m.buckets[l.items[i].Dimension]
	return b, b != nil && b.inc == l.incs[i]
}

func fail(err error) Expect { return Expect{Error: ErrName(err)} }

// apply runs one step and returns its outcome.
func (m *model) apply(st Step) Expect {
	if st.Resend {
		return m.resent()
	}
	e := m.decide(st)
	m.last = nil
	if resendable(st.Op) {
		m.last = &e
	}
	return e
}

// decide applies one step (not a resend) and returns its answer.
func (m *model) decide(st Step) Expect {
	now := m.base + st.AtMs
	m.replayed, m.decided = false, nil
	switch st.Op {
	case "put_bucket":
		return m.put(st, now)
	case "delete_bucket":
		if m.buckets[st.Name] == nil {
			return fail(unknownDimension(st.Name))
		}
		delete(m.buckets, st.Name)
		return Expect{}
	case "acquire":
		return m.acquire(st, now)
	case "release":
		return m.release(st)
	case "adjust":
		return m.adjust(st, now)
	case "extend":
		return m.extend(st, now)
	case "penalize":
		return m.penalize(st, now)
	case "cooldown":
		return m.cooldown(st, now)
	case "sync":
		return m.sync(st, now)
	case "peek":
		var e Expect
		for _, d := range st.Dimensions {
			b := m.buckets[d]
			if b == nil {
				return fail(unknownDimension(d))
			}
			e.Buckets = append(e.Buckets, m.state(b, now))
		}
		return e
	case "reconcile":
		return m.reconcile(st, now)
	case "reserve":
		return m.reserve(st, now)
	case "cancel":
		return m.cancel(st, now)
	case "dequeue":
		return m.dequeue(st, now)
	}
	panic("model: unknown op " + st.Op)
}

func (m *model) put(st Step, now int64) Expect {
	req, err := st.putRequest(time.UnixMilli(now))
	if err == nil {
		err = contract.PutBucket(req)
	}
	if err != nil {
		return fail(err)
	}
	b := req.Bucket
	lim := b.Config.Limits()
	old := m.buckets[b.Name]
	var cur bucket.Config
	if old != nil {
		cur = old.b.Config
	}
	if err := store.PutConflict(req, old != nil, cur); err != nil {
		return fail(err)
	}
	if old == nil {
		m.inc++
		m.buckets[b.Name] = &mBucket{b: b, lim: lim, st: bucket.State{Tokens: req.StartTokens(), Last: now}, inc: m.inc}
		return Expect{}
	}
	if err := store.CheckTypeChange(old.b, b); err != nil {
		return fail(err)
	}
	s, at := m.aligned(old, now)
	old.b, old.lim, old.st = b, lim, bucket.Reconfigure(old.lim, lim, s, at, st.Reset)
	return Expect{}
}

// state is a bucket's state at now, as Peek reports it.
func (m *model) state(b *mBucket, now int64) BucketExpect {
	s, at := m.aligned(b, now)
	r := bucket.Refill(b.lim, s, at)
	be := BucketExpect{Name: b.b.Name, Tokens: r.Tokens, LastRefillMs: r.Last - m.base}
	if n, next := m.records(b.b.Name); n > 0 {
		x := next - m.base
		be.ActiveLeases, be.NextExpiryMs = n, &x
	}
	if r.Until != 0 {
		u := r.Until - m.base
		be.CooldownUntilMs = &u
	}
	if r.Reserved != 0 {
		u := r.Reserved - m.base
		be.ReservedUntilMs = &u
	}
	if b.b.Type != bucket.Concurrent {
		c := r.Charged
		be.Charged = &c
	}
	for _, t := range b.queue {
		if t.Expires > now {
			be.Waiters++
		}
	}
	return be
}

// records counts the lease records holding dimension d in its current
// bucket (not in one deleted since) and returns the earliest expiry among
// them.
func (m *model) records(d string) (n int, earliest int64) {
	for _, l := range m.leases {
		if !l.record {
			continue
		}
		for i, it := range l.items {
			if _, ok := m.live(l, i); ok && it.Dimension == d {
				n++
				if earliest == 0 || l.expires < earliest {
					earliest = l.expires
				}
			}
		}
	}
	return n, earliest
}

func (m *model) release(st Step) Expect {
	l := m.leases[st.Lease]
	if l == nil || !l.record {
		return Expect{}
	}
	l.record = false
	e := Expect{Released: true}
	for i, it := range l.items {
		if b, ok := m.live(l, i); ok && b.b.Type == bucket.Concurrent {
			var capped bool
			b.st, capped = bucket.Restore(b.lim, b.st, it.Cost*bucket.Milli)
			e.RestoredItems = append(e.RestoredItems, RestoredExpect{it.Dimension, it.Cost, capped})
		}
	}
	slices.SortFunc(e.RestoredItems, func(a, b RestoredExpect) int { return strings.Compare(a.Dimension, b.Dimension) })
	return e
}

func (m *model) extend(st Step, now int64) Expect {
	if err := contract.TTL(time.Duration(st.TTLMs) * time.Millisecond); err != nil {
		return fail(err)
	}
	l := m.leases[st.Lease]
	switch {
	case l == nil || !l.record:
		return fail(store.ErrUnknownLease)
	case l.expires <= now:
		return fail(store.ErrLeaseExpired)
	}
	l.expires = now + st.TTLMs
	return Expect{ExpiresAtMs: l.expires - m.base}
}

func (m *model) penalize(st Step, now int64) Expect {
	req := store.PenalizeRequest{Now: time.UnixMilli(now), Dimension: st.Dimension, FactorMilli: st.FactorMilli}
	if err := contract.Penalize(req); err != nil {
		return fail(err)
	}
	b := m.buckets[st.Dimension]
	if b == nil {
		return fail(unknownDimension(st.Dimension))
	}
	if err := b.b.CheckPenalizable(); err != nil {
		return fail(err)
	}
	s, at := m.aligned(b, now)
	before := bucket.Available(b.lim, s, at)
	b.st = bucket.Penalize(b.lim, s, at, st.FactorMilli)
	return Expect{Before: before, After: b.st.Tokens}
}

func (m *model) acquire(st Step, now int64) Expect {
	req := &store.AcquireRequest{Now: time.UnixMilli(now), ID: m.id(st.Lease), TTL: time.Duration(st.TTLMs) * time.Millisecond,
		Poll: time.Duration(st.PollMs) * time.Millisecond, Queue: time.Duration(st.QueueMs) * time.Millisecond}
	for _, it := range st.Items {
		req.Items = append(req.Items, store.Item{Dimension: it.Dimension, Cost: it.Cost})
	}
	if err := contract.Acquire(req); err != nil {
		return fail(err)
	}
	bs := make([]*mBucket, len(req.Items))
	resolved := make([]store.Item, len(req.Items))
	record := st.Record || m.always
	for i, it := range req.Items {
		if bs[i] = m.buckets[it.Dimension]; bs[i] == nil {
			return fail(unknownDimension(it.Dimension))
		}
	}
	for i, it := range req.Items {
		c, err := bs[i].b.ResolveCost(it)
		if err != nil {
			return fail(err)
		}
		resolved[i] = store.Item{Dimension: it.Dimension, Cost: c}
		record = record || bs[i].b.Type == bucket.Concurrent
	}
	if old := m.leases[st.Lease]; old != nil && old.record {
		if !store.SameItems(old.items, resolved) {
			return fail(store.LeaseInUse(req.ID))
		}
		m.replayed = true
		return m.retried(old, bs, resolved, now)
	}
	poll := st.PollMs
	if poll == 0 {
		poll = store.DefaultPoll.Milliseconds()
	}
	if e, refused := m.refuseBehind(bs, resolved, now); refused {
		return e
	}
	e := Expect{Granted: true}
	ahead, aheadCost := m.ahead(bs, req.ID, now)
	next := make([]bucket.State, len(bs))
	decided := make([]int64, len(bs))
	for i, b := range bs {
		s, at := m.aligned(b, now)
		decided[i] = at
		took, wait, ok := bucket.Take(b.lim, s, at, resolved[i].Cost*bucket.Milli)
		// Queue liveness: a waiter whose cost plus the tickets ahead of it
		// fit in the free balance is granted.
		ok = ok && (aheadCost[i] == 0 || bucket.Available(b.lim, s, at) >= (resolved[i].Cost+aheadCost[i])*bucket.Milli)
		next[i] = took
		ie := ItemExpect{Dimension: b.b.Name, Cost: resolved[i].Cost, Remaining: took.Tokens}
		if !ok {
			e.Granted = false
			if b.b.Type == bucket.Concurrent {
				_, earliest := m.records(b.b.Name)
				wait = bucket.ConcurrentRetry(now, earliest, poll)
			}
			ie.RetryInMs = wait
			e.RetryInMs = max(e.RetryInMs, wait)
			ie.Remaining = bucket.Available(b.lim, s, at)
		}
		e.Items = append(e.Items, ie)
	}
	if !e.Granted {
		for i, b := range bs {
			s, at := m.aligned(b, now)
			e.Items[i].Remaining = bucket.Available(b.lim, s, at)
		}
		costs := make([]int64, len(bs))
		for i := range bs {
			costs[i] = resolved[i].Cost
		}
		e.Ahead = m.enqueue(bs, req.ID, ahead, costs, now, st.QueueMs)
		return e
	}
	m.dequeueAll(bs, req.ID)
	l := &mLease{record: record, recorded: record, created: now, expires: now + st.TTLMs}
	for i, b := range bs {
		b.st = next[i]
		l.items = append(l.items, resolved[i])
		l.incs = append(l.incs, b.inc)
	}
	m.leases[st.Lease] = l
	m.decided = decided
	e.Recorded, e.ExpiresAtMs = record, l.expires-m.base
	return e
}

// retried is the answer to a retried acquisition: the grant it was, with
// the balances available now, changing nothing.
func (m *model) retried(l *mLease, bs []*mBucket, items []store.Item, now int64) Expect {
	e := Expect{Granted: true, Recorded: true, ExpiresAtMs: l.expires - m.base}
	for i, b := range bs {
		s, at := m.aligned(b, now)
		e.Items = append(e.Items, ItemExpect{Dimension: b.b.Name, Cost: items[i].Cost, Remaining: bucket.Available(b.lim, s, at)})
	}
	return e
}

// retriedReserve is retried for a reservation sent again: each item also
// reports its bucket's settlement counter as it is now.
func (m *model) retriedReserve(l *mLease, bs []*mBucket, items []store.Item, now int64) Expect {
	e := m.retried(l, bs, items, now)
	for i, b := range bs {
		c := b.st.Charged
		e.Items[i].Charged = &c
	}
	return e
}

func (m *model) adjust(st Step, now int64) Expect {
	l := m.leases[st.Lease]
	req := store.AdjustRequest{Now: time.UnixMilli(now), Dimension: st.Dimension, Delta: st.Delta, Recorded: l == nil || l.recorded}
	i := -1
	if l != nil {
		i = slices.IndexFunc(l.items, func(it store.Item) bool { return it.Dimension == st.Dimension })
		if i >= 0 && !l.recorded {
			req.Held = l.items[i].Cost
		}
	}
	if err := contract.Adjust(req); err != nil {
		return fail(err)
	}
	b := m.buckets[st.Dimension]
	if b == nil {
		return fail(unknownDimension(st.Dimension))
	}
	if err := b.b.CheckAdjustable(); err != nil {
		return fail(err)
	}
	if req.Recorded && (l == nil || !l.record) {
		return fail(store.ErrUnknownLease)
	}
	if i < 0 {
		if !l.recorded {
			panic("model: adjust of a dimension an unrecorded lease does not hold is store-dependent")
		}
		return fail(&bucket.FieldError{Field: "dimension", Value: st.Dimension, Reason: "is not part of the lease"})
	}
	if st.Delta < 0 && l.expires <= now {
		return fail(store.ErrLeaseExpired)
	}
	if _, err := store.AdjustHeld(st.Dimension, l.items[i].Cost, st.Delta); err != nil {
		return fail(err)
	}
	s, at := m.aligned(b, now)
	var applied int64
	b.st, applied = bucket.Adjust(b.lim, s, at, st.Delta*bucket.Milli)
	l.items[i].Cost = store.HeldAfter(l.items[i].Cost, st.Delta, applied)
	return Expect{Held: l.items[i].Cost, Applied: applied, Remaining: b.st.Tokens}
}

func (m *model) reconcile(st Step, now int64) Expect {
	limit := st.Limit
	if limit == 0 {
		limit = store.DefaultReconcileLimit
	}
	var expired []*mLease
	for _, l := range m.leases {
		if l.record && l.expires <= now {
			expired = append(expired, l)
		}
	}
	if len(expired) > limit {
		panic("model: a reconcile batch smaller than the expired leases is store-dependent; raise its limit")
	}
	var e Expect
	dims := map[string]bool{}
	for _, l := range expired {
		l.record = false
		e.Restored++
		live, reclaimed, capped := false, false, false
		for i, it := range l.items {
			b, ok := m.live(l, i)
			if !ok {
				continue
			}
			live, dims[it.Dimension] = true, true
			if b.b.Type == bucket.Concurrent {
				var c bool
				b.st, c = bucket.Restore(b.lim, b.st, it.Cost*bucket.Milli)
				reclaimed, capped = true, capped || c
			}
		}
		switch {
		case !live:
			e.Orphans++
		case reclaimed:
			e.Reclaimed++
			if capped {
				e.AlreadyCapped++
			}
		}
	}
	for d := range dims {
		e.Dimensions = append(e.Dimensions, d)
	}
	slices.Sort(e.Dimensions)
	return e
}

// clone returns a deep copy of m, for checkers that explore several
// orders of the same operations.
func (m *model) clone() *model {
	c := *m
	c.buckets = make(map[string]*mBucket, len(m.buckets))
	for k, b := range m.buckets {
		nb := *b
		nb.queue = slices.Clone(b.queue)
		c.buckets[k] = &nb
	}
	c.leases = make(map[string]*mLease, len(m.leases))
	for k, l := range m.leases {
		nl := *l
		nl.items, nl.incs = slices.Clone(l.items), slices.Clone(l.incs)
		c.leases[k] = &nl
	}
	return &c
}

// key renders m's whole state canonically: equal states have equal keys.
func (m *model) key() string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(m.buckets)) {
		x := m.buckets[name]
		fmt.Fprintf(&b, "%s %+v %d %d %d %d %d %v;", name, x.b.Config, x.inc, x.st.Tokens, x.st.Last, x.st.Until, x.st.Reserved, x.queue)
	}
	for _, label := range slices.Sorted(maps.Keys(m.leases)) {
		l := m.leases[label]
		fmt.Fprintf(&b, "%s %v %v %t %t %d %d %d %t;", label, l.items, l.incs, l.record, l.recorded, l.created, l.expires, l.validAt, l.cancelled)
	}
	return b.String()
}

// unknownDimension is the error for a name with no bucket: the portable
// layer's validation error when the name is invalid, else a
// *store.ConfigurationError.
func unknownDimension(name string) error {
	if err := contract.Name(name); err != nil {
		return err
	}
	return &store.ConfigurationError{Dimension: name}
}
