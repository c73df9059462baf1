package memstore

import (
	"context"
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
	m      map[*func(string)]struct{}
	closed chan struct{} // closed by Store.Close
	once   sync.Once
}

// WatchFreed implements store.FreedWatcher: every Release that restored a
// concurrent item, Dequeue and Reconcile that reclaimed a lease, by any
// client of this store, calls freed of every watch at once, in its own
// goroutine.
func (s *Store) WatchFreed(ctx context.Context, freed func(dimension string)) error {
	if err := s.check(); err != nil {
		return err
	}
	ws := &s.watchers
	f := &freed
	ws.mu.Lock()
	if ws.m == nil {
		ws.m = map[*func(string)]struct{}{}
	}
	ws.m[f] = struct{}{}
	ws.mu.Unlock()
	defer func() {
		ws.mu.Lock()
		delete(ws.m, f)
		ws.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return nil
	case <-ws.closed:
		return store.ErrClosed
	}
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
	ws.once.Do(func() { close(ws.closed) })
}
