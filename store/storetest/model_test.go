package storetest

import (
	"slices"
	"strings"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// model is the reference model the golden vectors are generated from. It is
// written directly on the bucket functions and the store validation helpers
// (the contract), independently of any store implementation, and keeps
// everything in plain maps with no concurrency.
type model struct {
	base    int64
	buckets map[string]*mBucket
	leases  map[string]*mLease // by label; granted leases only
}

type mBucket struct {
	b   store.Bucket
	lim bucket.Limits
	st  bucket.State
}

type mLease struct {
	items    []store.Item // costs in tokens, updated by Adjust
	record   bool         // a record exists in the store
	recorded bool         // the grant wrote a record
	expires  int64
}

func newModel(base int64) *model {
	return &model{base: base, buckets: map[string]*mBucket{}, leases: map[string]*mLease{}}
}

func fail(err error) Expect { return Expect{Error: ErrName(err)} }

// apply runs one step and returns its outcome.
func (m *model) apply(st Step) Expect {
	now := m.base + st.AtMs
	switch st.Op {
	case "put_bucket":
		b, err := st.Bucket.Config()
		if err == nil {
			err = store.ValidateBucket(b)
		}
		if err != nil {
			return fail(err)
		}
		lim := b.Config.Limits()
		if old := m.buckets[b.Name]; old != nil {
			*old = mBucket{b, lim, bucket.Reconfigure(old.lim, lim, old.st, now, st.Reset)}
		} else {
			m.buckets[b.Name] = &mBucket{b, lim, bucket.State{Tokens: lim.Capacity, Last: now}}
		}
		return Expect{}
	case "delete_bucket":
		if m.buckets[st.Name] == nil {
			return fail(store.UnknownDimension(st.Name))
		}
		delete(m.buckets, st.Name)
		return Expect{}
	case "acquire":
		return m.acquire(st, now)
	case "release":
		l := m.leases[st.Lease]
		if l == nil || !l.record {
			return Expect{}
		}
		l.record = false
		e := Expect{Released: true}
		for _, it := range l.items {
			if b := m.buckets[it.Dimension]; b != nil && b.b.Type == bucket.Concurrent {
				var capped bool
				b.st, capped = bucket.Restore(b.lim, b.st, it.Cost*bucket.Milli)
				e.RestoredItems = append(e.RestoredItems, RestoredExpect{it.Dimension, it.Cost, capped})
			}
		}
		slices.SortFunc(e.RestoredItems, func(a, b RestoredExpect) int { return strings.Compare(a.Dimension, b.Dimension) })
		return e
	case "adjust":
		return m.adjust(st, now)
	case "extend":
		if err := store.ValidateTTL(time.Duration(st.TTLMs) * time.Millisecond); err != nil {
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
	case "penalize":
		req := store.PenalizeRequest{Dimension: st.Dimension, FactorMilli: st.FactorMilli}
		if err := store.ValidatePenalize(req); err != nil {
			return fail(err)
		}
		b := m.buckets[st.Dimension]
		if b == nil {
			return fail(store.UnknownDimension(st.Dimension))
		}
		if err := store.CheckPenalizable(&b.b); err != nil {
			return fail(err)
		}
		before := bucket.Available(b.lim, b.st, now)
		b.st = bucket.Penalize(b.lim, b.st, now, st.FactorMilli)
		return Expect{Before: before, After: b.st.Tokens}
	case "peek":
		var e Expect
		for _, d := range st.Dimensions {
			b := m.buckets[d]
			if b == nil {
				return fail(store.UnknownDimension(d))
			}
			r := bucket.Refill(b.lim, b.st, now)
			be := BucketExpect{Name: d, Tokens: r.Tokens, LastRefillMs: r.Last - m.base}
			if n, next := m.records(d); n > 0 {
				x := next - m.base
				be.ActiveLeases, be.NextExpiryMs = n, &x
			}
			e.Buckets = append(e.Buckets, be)
		}
		return e
	case "reconcile":
		return m.reconcile(st, now)
	}
	panic("model: unknown op " + st.Op)
}

// records counts the lease records holding dimension d and returns the
// earliest expiry among them.
func (m *model) records(d string) (n int, earliest int64) {
	for _, l := range m.leases {
		if l.record && slices.ContainsFunc(l.items, func(it store.Item) bool { return it.Dimension == d }) {
			n++
			if earliest == 0 || l.expires < earliest {
				earliest = l.expires
			}
		}
	}
	return n, earliest
}

func (m *model) acquire(st Step, now int64) Expect {
	req := &store.AcquireRequest{ID: idFor(st.Lease), TTL: time.Duration(st.TTLMs) * time.Millisecond,
		Poll: time.Duration(st.PollMs) * time.Millisecond}
	for _, it := range st.Items {
		req.Items = append(req.Items, store.Item{Dimension: it.Dimension, Cost: it.Cost})
	}
	if err := store.ValidateAcquire(req); err != nil {
		return fail(err)
	}
	bs := make([]*mBucket, len(req.Items))
	costs := make([]int64, len(req.Items))
	record := st.Record
	for i, it := range req.Items {
		if bs[i] = m.buckets[it.Dimension]; bs[i] == nil {
			return fail(store.UnknownDimension(it.Dimension))
		}
	}
	for i, it := range req.Items {
		c, err := store.ResolveCost(&bs[i].b, it)
		if err != nil {
			return fail(err)
		}
		costs[i] = c
		record = record || bs[i].b.Type == bucket.Concurrent
	}
	poll := st.PollMs
	if poll == 0 {
		poll = store.DefaultPoll.Milliseconds()
	}
	e := Expect{Granted: true}
	next := make([]bucket.State, len(bs))
	for i, b := range bs {
		s, wait, ok := bucket.Take(b.lim, b.st, now, costs[i]*bucket.Milli)
		next[i] = s
		ie := ItemExpect{Dimension: b.b.Name, Cost: costs[i], Remaining: s.Tokens}
		if !ok {
			e.Granted = false
			if b.b.Type == bucket.Concurrent {
				_, earliest := m.records(b.b.Name)
				wait = bucket.ConcurrentRetry(now, earliest, poll)
			}
			ie.RetryInMs = wait
			e.RetryInMs = max(e.RetryInMs, wait)
		}
		e.Items = append(e.Items, ie)
	}
	if !e.Granted {
		for i, b := range bs {
			e.Items[i].Remaining = bucket.Available(b.lim, b.st, now)
		}
		return e
	}
	if old := m.leases[st.Lease]; old != nil {
		panic("model: lease label reused after a grant: " + st.Lease)
	}
	l := &mLease{record: record, recorded: record, expires: now + st.TTLMs}
	for i, b := range bs {
		b.st = next[i]
		l.items = append(l.items, store.Item{Dimension: b.b.Name, Cost: costs[i]})
	}
	m.leases[st.Lease] = l
	e.Recorded, e.ExpiresAtMs = record, l.expires-m.base
	return e
}

func (m *model) adjust(st Step, now int64) Expect {
	l := m.leases[st.Lease]
	req := store.AdjustRequest{Dimension: st.Dimension, Delta: st.Delta, Recorded: l == nil || l.recorded}
	if l != nil && !l.recorded {
		for _, it := range l.items {
			if it.Dimension == st.Dimension {
				req.Held = it.Cost
			}
		}
	}
	if err := store.ValidateAdjust(req); err != nil {
		return fail(err)
	}
	b := m.buckets[st.Dimension]
	if b == nil {
		return fail(store.UnknownDimension(st.Dimension))
	}
	if err := store.CheckAdjustable(&b.b); err != nil {
		return fail(err)
	}
	if req.Recorded && (l == nil || !l.record) {
		return fail(store.ErrUnknownLease)
	}
	if l.expires <= now {
		return fail(store.ErrLeaseExpired)
	}
	i := slices.IndexFunc(l.items, func(it store.Item) bool { return it.Dimension == st.Dimension })
	if i < 0 {
		panic("model: adjust of a dimension the lease does not hold")
	}
	held, err := store.AdjustHeld(st.Dimension, l.items[i].Cost, st.Delta)
	if err != nil {
		return fail(err)
	}
	var applied int64
	b.st, applied = bucket.Adjust(b.lim, b.st, now, st.Delta*bucket.Milli)
	l.items[i].Cost = held
	return Expect{Held: held, Applied: applied, Remaining: b.st.Tokens}
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
		for _, it := range l.items {
			b := m.buckets[it.Dimension]
			if b == nil {
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
