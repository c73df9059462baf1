// Package recorder wraps a store.Store and records, in the exact order and at
// the exact time the store applied them, every grant, settlement and release,
// as a log for package verify.
//
// The recorder serialises Acquire, Reserve, Cancel, Adjust and Release
// behind one mutex and hands the store a clock that never runs backwards
// (the caller's time, or the previous operation's if that is later), so
// the log's order and timestamps are the store's own. A reservation is
// logged as a grant at its valid instant, when its tokens are used, and a
// cancellation as a refund of what it gave back, at the same instant. That costs throughput, not correctness: it
// is meant for the demo and for tests, within one process and over a store
// that uses the time it is given (memstore). Reconcile is refused while
// recording, because it would reclaim leases without a release event;
// PutBucket with reset, Penalize, Cooldown and Sync change balances outside
// the log, so call them before recording starts (Penalize, Cooldown and Sync
// only ever lower a balance or delay its refill, which keeps the bound
// valid).
package recorder

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/cmd/verify"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// ErrReconcile is returned by Reconcile: reclaiming leases while recording
// would make the log incomplete.
var ErrReconcile = errors.New("recorder: reconcile is not allowed while recording")

// Store is a recording store.Store. Operations other than Acquire,
// Reserve, Cancel, Adjust, Release and Reconcile go straight to the
// wrapped store.
type Store struct {
	contract.Forward

	mu     sync.Mutex
	last   int64 // ms of the latest operation
	events []verify.Event
	dims   map[string]*Counts
	// pending maps the reservations not yet valid to their valid instant,
	// so that a cancellation's refund is logged at it.
	pending map[store.LeaseID]time.Time
}

// Counts are live per-dimension counters, for progress displays.
type Counts struct {
	// Granted counts grants that included the dimension.
	Granted int64 `json:"granted"`
	// Denied counts RETRY_IN answers in which this dimension was short.
	Denied int64 `json:"denied"`
	// Milli is the net amount debited (grants and settlements), millitokens.
	Milli int64 `json:"consumed_milli"`
	// InFlight is the cost held now (concurrent dimensions), millitokens.
	InFlight int64 `json:"in_flight_milli"`
}

// New wraps inner.
func New(inner store.Store) *Store {
	return &Store{Forward: contract.Forward{Store: inner}, dims: map[string]*Counts{}}
}

var _ store.Store = (*Store)(nil)

// now returns t, or the latest operation's time if that is later, in whole
// milliseconds. The caller holds s.mu.
func (s *Store) now(t time.Time) time.Time {
	ms := max(t.UnixMilli(), s.last)
	s.last = ms
	return time.UnixMilli(ms)
}

func (s *Store) counts(dim string) *Counts {
	c := s.dims[dim]
	if c == nil {
		c = &Counts{}
		s.dims[dim] = c
	}
	return c
}

// decided counts a decision on items, granted or not, and records a grant
// event per item at at (the decision time, or a reservation's valid
// instant). Call with s.mu held.
func (s *Store) decided(items []store.ItemResult, granted bool, at time.Time) {
	for _, it := range items {
		c := s.counts(it.Dimension)
		if !granted {
			if it.RetryIn > 0 {
				c.Denied++
			}
			continue
		}
		milli := it.Cost * bucket.Milli
		c.Granted++
		c.Milli += milli
		if it.Type == bucket.Concurrent {
			c.InFlight += milli
		}
		s.events = append(s.events, verify.Event{Time: at, Dimension: it.Dimension, Kind: verify.Grant, Milli: milli})
	}
}

// Acquire implements store.Store, recording a grant event per item.
func (s *Store) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	req.Now = s.now(req.Now)
	if err := s.Store.Acquire(ctx, req, res); err != nil {
		return err
	}
	s.decided(res.Items, res.Granted, req.Now)
	return nil
}

// Adjust implements store.Store, recording the change the store applied.
func (s *Store) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req.Now = s.now(req.Now)
	res, err := s.Store.Adjust(ctx, req)
	if err != nil || res.Applied == 0 {
		return res, err
	}
	s.counts(req.Dimension).Milli += res.Applied
	s.events = append(s.events, verify.Event{Time: req.Now, Dimension: req.Dimension, Kind: verify.Settle, Milli: res.Applied})
	return res, nil
}

// Release implements store.Store, recording the slots it gave back.
func (s *Store) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req.Now = s.now(req.Now)
	res, err := s.Store.Release(ctx, req)
	if err != nil {
		return res, err
	}
	for _, r := range res.Restored {
		milli := r.Cost * bucket.Milli
		s.counts(r.Dimension).InFlight -= milli
		s.events = append(s.events, verify.Event{Time: req.Now, Dimension: r.Dimension, Kind: verify.Release, Milli: milli})
	}
	return res, nil
}

// Reconcile refuses to run; see ErrReconcile.
func (s *Store) Reconcile(context.Context, store.ReconcileRequest) (store.ReconcileResult, error) {
	return store.ReconcileResult{}, ErrReconcile
}

// Events returns a copy of the log, in the order the store applied it.
func (s *Store) Events() []verify.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]verify.Event(nil), s.events...)
}

// Snapshot returns a copy of the per-dimension counters.
func (s *Store) Snapshot() map[string]Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Counts, len(s.dims))
	for k, v := range s.dims {
		out[k] = *v
	}
	return out
}
