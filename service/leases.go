package service

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/ontopix/sluice"
)

// registry holds the leases a server granted, under handles of their own:
// a lease's store id is handed to the next holder when a release hands a
// slot over in line, so the id alone would let a resent Release of the
// first holder release the second.
type registry struct {
	mu     sync.Mutex
	max    int
	byID   map[string]heldLease
	lastGC time.Time
	// sweeping is set while a sweep runs, so that sweeps never pile up
	// behind a lease busy in the store.
	sweeping bool
}

// heldLease is a lease and the principal that acquired it ("" without
// authentication).
type heldLease struct {
	*sluice.Lease
	owner string
}

func newRegistry(max int) *registry {
	return &registry{max: max, byID: make(map[string]heldLease)}
}

// handle returns a fresh handle for l: its store id, a dot, and 8 random
// bytes in hex.
func handle(l *sluice.Lease) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return l.ID() + "." + hex.EncodeToString(b[:])
}

// put registers l and returns its handle, or "" when the registry is full
// (after dropping the expired leases). Once a second it also sweeps out
// the leases expired for more than a second, in the background: reading
// a lease's expiry waits for an operation in flight on it (a store call
// of up to the operation timeout), which must never hold up the server's
// other calls behind the registry's lock.
func (r *registry) put(l *sluice.Lease, owner string, now time.Time) string {
	h := handle(l)
	r.mu.Lock()
	full := len(r.byID) >= r.max
	due := now.Sub(r.lastGC) > time.Second && !r.sweeping
	if !full {
		r.byID[h] = heldLease{l, owner}
	}
	var snap []sweepEntry
	if full || due {
		r.lastGC, r.sweeping = now, true
		snap = r.snapshotLocked()
	}
	r.mu.Unlock()
	if !full {
		if due {
			go r.sweep(snap, now)
		}
		return h
	}
	// Full: make room first, if expired leases free any.
	r.sweep(snap, now)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.byID) >= r.max {
		return ""
	}
	r.byID[h] = heldLease{l, owner}
	return h
}

// sweepEntry is a lease as a sweep saw it.
type sweepEntry struct {
	h string
	l *sluice.Lease
}

func (r *registry) snapshotLocked() []sweepEntry {
	snap := make([]sweepEntry, 0, len(r.byID))
	for h, l := range r.byID {
		snap = append(snap, sweepEntry{h, l.Lease})
	}
	return snap
}

// sweep drops the leases of snap expired for more than a second at now
// and still registered: their holder can no longer extend them, and the
// store reclaims their slots. It runs without the registry's lock.
func (r *registry) sweep(snap []sweepEntry, now time.Time) {
	for _, e := range snap {
		if now.Sub(e.l.ExpiresAt()) <= time.Second {
			continue
		}
		r.mu.Lock()
		if cur, ok := r.byID[e.h]; ok && cur.Lease == e.l {
			delete(r.byID, e.h)
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.sweeping = false
	r.mu.Unlock()
}

func (r *registry) get(h string) (heldLease, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.byID[h]
	return l, ok
}

// take removes and returns the lease under h, when owner holds it.
func (r *registry) take(h, owner string) (heldLease, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.byID[h]
	if !ok || l.owner != owner {
		return heldLease{}, false
	}
	delete(r.byID, h)
	return l, true
}

func (r *registry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID)
}

// drain removes and returns every lease.
func (r *registry) drain() []*sluice.Lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*sluice.Lease, 0, len(r.byID))
	for h, l := range r.byID {
		out = append(out, l.Lease)
		delete(r.byID, h)
	}
	return out
}

// idempotency keeps answers under their callers' keys for
// idempotencyWindow. A call with a key first claims it; a second call with
// the key waits for the first one's answer.
type idempotency struct {
	mu     sync.Mutex
	max    int
	byKey  map[string]*keyed
	lastGC time.Time
}

type keyed struct {
	done   chan struct{}
	fp     [sha256.Size]byte // the request's fingerprint
	at     time.Time
	answer any
	err    error
}

func newIdempotency(max int) *idempotency {
	return &idempotency{max: max, byKey: make(map[string]*keyed)}
}

// claim returns the entry under key and whether the caller owns it (and
// must finish it). It returns nil when the table is full.
func (t *idempotency) claim(key string, fp [sha256.Size]byte, now time.Time) (*keyed, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.lastGC) > time.Second || len(t.byKey) >= t.max {
		t.lastGC = now
		for k, e := range t.byKey {
			select {
			case <-e.done:
				if now.Sub(e.at) > idempotencyWindow {
					delete(t.byKey, k)
				}
			default:
			}
		}
	}
	if e, ok := t.byKey[key]; ok {
		return e, false
	}
	if len(t.byKey) >= t.max {
		return nil, false
	}
	e := &keyed{done: make(chan struct{}), fp: fp, at: now}
	t.byKey[key] = e
	return e, true
}

// finish records the answer of a claimed entry; an error forgets the key,
// so that the caller may try again.
func (t *idempotency) finish(key string, e *keyed, answer any, err error, now time.Time) {
	t.mu.Lock()
	e.answer, e.err, e.at = answer, err, now
	if err != nil {
		delete(t.byKey, key)
	}
	t.mu.Unlock()
	close(e.done)
}

// restore puts back a lease that take removed, under the same handle.
func (r *registry) restore(h string, l heldLease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byID[h] = l
}
