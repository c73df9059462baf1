// Package memstore is Sluice's embedded store: buckets and leases in process
// memory, for a single process, for tests and for the demo.
//
// Every bucket has its own mutex and the bucket table is copy-on-write, so
// acquisitions on different buckets never contend on a shared lock; a
// multi-dimension acquisition locks its buckets in name order, which makes it
// atomic and deadlock-free. Lease records live in 32 independently locked
// shards. The store starts no goroutines.
//
// The store uses the time passed in each request (the client's Clock).
package memstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

const leaseShards = 32

// skewMs is the largest clock disagreement the store tolerates (see
// bucket.Align). One process has one clock, so only a clock stepped back,
// as a test clock may be, ever meets it.
const skewMs = int64(store.DefaultMaxSkew / time.Millisecond)

// Store is the in-memory store. The zero value is not usable; call New.
// It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex // serialises writers of buckets
	buckets atomic.Pointer[map[string]*entry]
	shards  [leaseShards]shard
	closed  atomic.Bool
}

type entry struct {
	name    string // immutable copy of b.Name, read without the lock
	mu      sync.Mutex
	b       store.Bucket
	lim     bucket.Limits
	st      bucket.State
	leases  map[*lease]struct{} // records holding this bucket
	deleted bool
}

type shard struct {
	mu sync.Mutex
	m  map[store.LeaseID]*lease
	_  [40]byte // keep shards on separate cache lines
}

type lease struct {
	id      store.LeaseID
	items   []store.Item // costs in tokens; guarded by the shard lock
	ents    []*entry     // the buckets the lease was granted on, parallel to items
	buf     [2]store.Item
	entBuf  [2]*entry
	caller  string
	created int64
	expires atomic.Int64 // ms
}

// New returns an empty store.
func New() *Store {
	s := &Store{}
	m := map[string]*entry{}
	s.buckets.Store(&m)
	for i := range s.shards {
		s.shards[i].m = map[store.LeaseID]*lease{}
	}
	return s
}

var _ store.InProcess = (*Store)(nil)

// InProcess implements store.InProcess: every operation works on memory
// under short critical sections and never blocks on I/O.
func (s *Store) InProcess() {}

func (s *Store) shard(id store.LeaseID) *shard {
	return &s.shards[id[15]%leaseShards]
}

func (s *Store) lookup(name string) *entry {
	return (*s.buckets.Load())[name]
}

func (s *Store) check() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// Close marks the store closed. It is idempotent.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// lockSorted locks es in name order and returns the order used, so that
// every multi-bucket operation takes locks in the same global order.
func lockSorted(es []*entry, order []uint8) {
	for i := range es {
		order[i] = uint8(i)
	}
	for i := 1; i < len(es); i++ { // insertion sort: at most MaxItems
		for j := i; j > 0 && es[order[j]].name < es[order[j-1]].name; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	for _, i := range order[:len(es)] {
		es[i].mu.Lock()
	}
}

func unlockAll(es []*entry) {
	for _, e := range es {
		e.mu.Unlock()
	}
}

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	if err := s.check(); err != nil {
		return err
	}
	now := req.Now.UnixMilli()
	n := len(req.Items)
	var esBuf [store.MaxItems]*entry
	var order [store.MaxItems]uint8
	es := esBuf[:n]
	for i, it := range req.Items {
		if es[i] = s.lookup(it.Dimension); es[i] == nil {
			return &store.ConfigurationError{Dimension: it.Dimension}
		}
	}
	lockSorted(es, order[:])
	defer unlockAll(es)

	var next [store.MaxItems]bucket.State
	var costs [store.MaxItems]int64
	record := req.Record
	for i, e := range es {
		if e.deleted {
			return &store.ConfigurationError{Dimension: e.b.Name}
		}
		c, err := e.b.ResolveCost(req.Items[i])
		if err != nil {
			return err
		}
		costs[i] = c
		if e.b.Type == bucket.Concurrent {
			record = true
		}
	}
	if cap(res.Items) >= n {
		res.Items = res.Items[:n]
	} else {
		res.Items = make([]store.ItemResult, n)
	}
	poll := req.Poll
	if l := s.leaseByID(req.ID); l != nil {
		return s.replay(req, res, l, es, costs[:n], now)
	}
	granted := true
	var retry int64
	var aligned [store.MaxItems]bucket.State
	var ats [store.MaxItems]int64
	for i, e := range es {
		aligned[i], ats[i] = bucket.Align(e.lim, e.st, now, skewMs)
		st, wait, ok := bucket.Take(e.lim, aligned[i], ats[i], costs[i]*bucket.Milli)
		next[i] = st
		ir := &res.Items[i]
		*ir = store.ItemResult{Dimension: e.b.Name, Type: e.b.Type, Cost: costs[i], Capacity: e.b.Capacity}
		if ok {
			ir.Remaining = st.Tokens
			continue
		}
		granted = false
		if e.lim.Type == bucket.Concurrent {
			wait = bucket.ConcurrentRetry(now, e.earliestExpiry(), poll.Milliseconds())
		}
		ir.Remaining = bucket.Available(e.lim, aligned[i], ats[i])
		ir.RetryIn = time.Duration(wait) * time.Millisecond
		retry = max(retry, wait)
	}
	res.Granted, res.Recorded = granted, false
	res.RetryIn, res.ExpiresAt = 0, time.Time{}
	if !granted {
		res.RetryIn = time.Duration(retry) * time.Millisecond
		for i, e := range es {
			if res.Items[i].RetryIn == 0 { // granted-looking items report what they have now
				res.Items[i].Remaining = bucket.Available(e.lim, aligned[i], ats[i])
			}
			// A bucket whose clock ran more than the maximum skew ahead is
			// rebased even on a denial, or its refill would never start.
			e.st = aligned[i]
		}
		return nil
	}
	expires := now + req.TTL.Milliseconds()
	if record {
		l := &lease{id: req.ID, caller: req.Caller, created: now}
		if n <= len(l.buf) {
			l.items, l.ents = l.buf[:n], l.entBuf[:n]
		} else {
			l.items, l.ents = make([]store.Item, n), make([]*entry, n)
		}
		copy(l.ents, es)
		l.expires.Store(expires)
		for i, e := range es {
			l.items[i] = store.Item{Dimension: e.b.Name, Cost: costs[i]}
		}
		sh := s.shard(req.ID)
		sh.mu.Lock()
		if dup := sh.m[req.ID]; dup != nil { // a concurrent acquisition with the same id won
			sh.mu.Unlock()
			return s.replay(req, res, dup, es, costs[:n], now)
		}
		sh.m[req.ID] = l
		sh.mu.Unlock()
		for _, e := range es {
			if e.leases == nil {
				e.leases = map[*lease]struct{}{}
			}
			e.leases[l] = struct{}{}
		}
		res.Recorded = true
	}
	for i, e := range es {
		e.st = next[i]
	}
	res.ExpiresAt = time.UnixMilli(expires)
	return nil
}

// earliestExpiry returns the earliest expiry among e's leases, or 0. The
// caller holds e.mu.
func (e *entry) earliestExpiry() int64 {
	var min int64
	for l := range e.leases {
		if x := l.expires.Load(); min == 0 || x < min {
			min = x
		}
	}
	return min
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	if err := s.check(); err != nil {
		return store.ReleaseResult{}, err
	}
	sh := s.shard(req.ID)
	sh.mu.Lock()
	l := sh.m[req.ID]
	sh.mu.Unlock()
	if l == nil {
		return store.ReleaseResult{}, nil
	}
	restored, ok, _ := s.remove(l, 0)
	if !ok {
		return store.ReleaseResult{}, nil
	}
	return store.ReleaseResult{Released: true, Restored: restored}, nil
}

// remove deletes lease l exactly once and restores its concurrent costs. It
// reports ok false when someone else removed it first or, when expiredBy is
// not zero, when the lease no longer expires by then (it was extended since
// the reconciler found it), and orphan when none of its buckets exist any
// more.
//
// It works on the very buckets the lease was granted on: a bucket deleted
// and re-created under the same name is a different bucket, and the old
// lease's cost must not flow into it.
func (s *Store) remove(l *lease, expiredBy int64) (restored []store.Restored, ok, orphan bool) {
	var order [store.MaxItems]uint8
	es := l.ents
	lockSorted(es, order[:])
	defer unlockAll(es)
	sh := s.shard(l.id)
	sh.mu.Lock()
	if sh.m[l.id] != l || (expiredBy != 0 && l.expires.Load() > expiredBy) {
		sh.mu.Unlock()
		return nil, false, false
	}
	delete(sh.m, l.id)
	items := l.items
	sh.mu.Unlock()
	live, conc := 0, 0
	for _, e := range es {
		if !e.deleted && e.b.Type == bucket.Concurrent {
			conc++
		}
	}
	if conc > 0 {
		restored = make([]store.Restored, 0, conc)
	}
	for k, e := range es {
		delete(e.leases, l)
		if e.deleted {
			continue
		}
		live++
		it := items[k]
		if e.b.Type != bucket.Concurrent {
			continue
		}
		var capped bool
		e.st, capped = bucket.Restore(e.lim, e.st, it.Cost*bucket.Milli)
		restored = append(restored, store.Restored{Dimension: it.Dimension, Cost: it.Cost, Capped: capped})
	}
	return restored, true, live == 0
}

// Extend implements store.Store.
func (s *Store) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	if err := s.check(); err != nil {
		return time.Time{}, err
	}
	now := req.Now.UnixMilli()
	sh := s.shard(req.ID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l := sh.m[req.ID]
	if l == nil {
		return time.Time{}, store.ErrUnknownLease
	}
	if l.expires.Load() <= now {
		return time.Time{}, store.ErrLeaseExpired
	}
	exp := now + req.TTL.Milliseconds()
	l.expires.Store(exp)
	return time.UnixMilli(exp), nil
}
