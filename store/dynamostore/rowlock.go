package dynamostore

import (
	"context"
	"fmt"
	"slices"

	"github.com/ontopix/sluice/store"
)

// Writes to one bucket row are conditioned on the version read: of two
// conditional writes to a row in flight at once, at most one can succeed.
// Within one Store they therefore gain nothing by overlapping, and each
// one that loses costs a round trip and, on a hot row, a retry that loses
// again to the next (n callers of one process on one row make O(n²)
// writes). A Store so lets one operation at a time decide and write on a
// row (lockRows): the next one starts from the row as just written, and
// only the writes of other processes can make it lose.

// rowLocks holds the row locks in use: a lock exists while some operation
// holds or waits for it. Its zero value is ready to use.
type rowLocks struct {
	locks map[string]*rowLock // guarded by Store.mu
}

// rowLock is one row's lock: a one-slot semaphore, and how many
// operations hold or wait for it.
type rowLock struct {
	sem   chan struct{}
	users int
}

// lockRows takes the locks of the rows names, in sorted order (so that two
// operations on overlapping rows never wait for each other in a cycle),
// waiting until each is free or ctx ends. It returns the function that
// releases them. A ctx that ends while waiting is reported as
// store.ErrContention: another call of this process holds the row.
func (s *Store) lockRows(ctx context.Context, names []string) (func(), error) {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	held := make([]string, 0, len(sorted))
	unlock := func() {
		for _, name := range held {
			s.unlockRow(name)
		}
	}
	for _, name := range sorted {
		l := s.rowLock(name)
		select {
		case l.sem <- struct{}{}:
			held = append(held, name)
		case <-ctx.Done():
			s.leaveRow(name, l)
			unlock()
			// The time ran out behind another call of this process that the
			// store has not answered yet: the store is not answering in
			// time, as for the call itself (a caller that gave up while a
			// frozen server held an earlier call got contention before).
			return func() {}, store.Unavailable(fmt.Sprintf("dynamostore: row %q busy in this process", name), ctx.Err())
		}
	}
	return unlock, nil
}

// rowLock returns name's lock, counting the caller as its user.
func (s *Store) rowLock(name string) *rowLock {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows.locks == nil {
		s.rows.locks = map[string]*rowLock{}
	}
	l := s.rows.locks[name]
	if l == nil {
		l = &rowLock{sem: make(chan struct{}, 1)}
		s.rows.locks[name] = l
	}
	l.users++
	return l
}

// unlockRow releases name's lock, held by the caller.
func (s *Store) unlockRow(name string) {
	s.mu.Lock()
	l := s.rows.locks[name]
	s.mu.Unlock()
	<-l.sem
	s.leaveRow(name, l)
}

// leaveRow uncounts the caller as a user of name's lock l, dropping the
// lock when nobody else holds or waits for it.
func (s *Store) leaveRow(name string, l *rowLock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.users--; l.users == 0 {
		delete(s.rows.locks, name)
	}
}
