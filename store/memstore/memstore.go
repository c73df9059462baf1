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
// Usage history (store.Usager) expires by time.Now: a row past its
// retention is neither stored nor listed, and a put drops the expired rows
// of its dimension at most once a minute.
package memstore

import (
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
	// watchers are the running WatchFreed calls.
	watchers watchers
	// usage is the usage history (store.Usager).
	usage usage
	// works holds the scratch space of acquisitions and reservations.
	works sync.Pool
}

type entry struct {
	name    string // immutable copy of b.Name, read without the lock
	mu      sync.Mutex
	b       store.Bucket
	lim     bucket.Limits
	st      bucket.State
	leases  map[*lease]struct{} // records holding this bucket
	queue   []store.Ticket      // a concurrent bucket's waiter queue
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
	validAt int64        // a reservation's valid instant; 0 for an acquisition
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

// Store implements the optional operations of the contract too.
var (
	_ store.Queuer = (*Store)(nil)
	_ store.Cooler = (*Store)(nil)
	_ store.Syncer = (*Store)(nil)
	_ store.Usager = (*Store)(nil)
)

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
	s.watchers.close()
	return nil
}

// lockItems finds the entry of each of items, into es (as long as
// items), and locks them with lockSorted; the caller unlocks them with
// unlockAll. An unknown dimension is a *store.ConfigurationError, and
// nothing is locked then.
func (s *Store) lockItems(items []store.Item, es []*entry, order []uint8) error {
	for i, it := range items {
		if es[i] = s.lookup(it.Dimension); es[i] == nil {
			return &store.ConfigurationError{Dimension: it.Dimension}
		}
	}
	lockSorted(es, order)
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

// state snapshots e at now; the caller holds e.mu.
func (e *entry) state(now int64) store.BucketState {
	st := e.st
	at, _ := bucket.Align(e.lim, st, now, skewMs)
	r := bucket.Refill(e.lim, st, at)
	bs := store.BucketState{
		Bucket:        e.b,
		Tokens:        r.Tokens,
		LastRefill:    r.Last,
		CooldownUntil: r.Until,
		ReservedUntil: r.Reserved,
		Charged:       r.Charged,
		ActiveLeases:  len(e.leases),
		Now:           time.UnixMilli(now),
	}
	if x := e.earliestExpiry(); x != 0 {
		bs.NextExpiry = time.UnixMilli(x)
	}
	for _, t := range e.queue {
		if t.Expires > now {
			bs.Waiters++
		}
	}
	return bs
}

// work is one acquisition's or reservation's scratch space: arrays of
// MaxItems that would make the caller's stack frame large enough to grow
// the stack of every short-lived goroutine (a server's request handler)
// that makes the call.
type work struct {
	es            [store.MaxItems]*entry
	order         [store.MaxItems]uint8
	next, aligned [store.MaxItems]bucket.State
	costs, ats    [store.MaxItems]int64
	waits         [store.MaxItems]int64
	aheadCost     [store.MaxItems]int64
	ahead         [store.MaxItems]int
}

// scratch returns a work from s's pool; the caller puts it back, with no
// entry left in es.
func (s *Store) scratch() *work {
	if w, ok := s.works.Get().(*work); ok {
		return w
	}
	return new(work)
}
