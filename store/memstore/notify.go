package memstore

import (
	"context"
	"errors"
	"sync"

	"github.com/ontopix/sluice/store"
)

var _ store.FreedWatcher = (*Store)(nil)

// watchers fans notices of freed units out to the store's watches (see
// store.FreedWatcher), in the goroutine of the call that freed them.
type watchers struct {
	// mu is held for reading while notices are delivered, so that a
	// watch that ends gets none after WatchFreed returned.
	mu     sync.RWMutex
	m      map[*func(string)]context.CancelCauseFunc
	closed bool
}

// WatchFreed implements store.FreedWatcher: every Release that restored a
// concurrent item, Dequeue and Reconcile that reclaimed a lease, by any
// client of this store, calls freed of every watch at once, in its own
// goroutine.
func (s *Store) WatchFreed(ctx context.Context, freed func(dimension string)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ws := &s.watchers
	f := &freed
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return store.ErrClosed
	}
	if ws.m == nil {
		ws.m = map[*func(string)]context.CancelCauseFunc{}
	}
	ws.m[f] = cancel
	ws.mu.Unlock()
	defer func() {
		ws.mu.Lock()
		delete(ws.m, f)
		ws.mu.Unlock()
	}()
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), store.ErrClosed) {
		return store.ErrClosed
	}
	return nil
}

// notify tells every watch that units of dims may have been freed. The
// caller holds no bucket lock.
func (s *Store) notify(dims ...string) {
	ws := &s.watchers
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	for f := range ws.m {
		for _, d := range dims {
			(*f)(d)
		}
	}
}

// notifyRestored is notify for the dimensions of rs.
func (s *Store) notifyRestored(rs []store.Restored) {
	if len(rs) == 0 {
		return
	}
	dims := make([]string, len(rs))
	for i, r := range rs {
		dims[i] = r.Dimension
	}
	s.notify(dims...)
}

// close ends every watch; Store.Close calls it.
func (ws *watchers) close() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.closed = true
	for _, cancel := range ws.m {
		cancel(store.ErrClosed)
	}
}
