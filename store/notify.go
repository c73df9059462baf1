package store

import "context"

// FreedWatcher is an optional capability of a Store: it tells a client at
// once that units of a concurrent dimension may have been freed anywhere in
// the fleet, so that the client's waiters in line (see
// AcquireRequest.Queue) ask the store again without waiting for their next
// poll. The client discovers it by type assertion; a store without it is
// polled, which is always correct, only slower to hand over a freed slot.
//
// A store that implements it sends a notice for each concurrent dimension
// whose units a Release restored, whose tickets a Dequeue removed, or whose
// expired leases a Reconcile reclaimed, by any client of the store, in this
// process or another. It may send notices for other reasons too (the
// expiry of a ticket or a lease, or none at all): a notice means only "ask
// again", never that a slot is free.
//
// Delivery is best-effort. A notice may be lost (a connection that broke, a
// subscriber that was reconnecting, a full buffer), delayed, duplicated or
// merged with others; a lost one costs the waiters at most a poll interval,
// and correctness never depends on a notice.
type FreedWatcher interface {
	Store
	// WatchFreed calls freed with a dimension's name for every notice
	// until ctx ends or the store is closed; then it returns nil (ctx's
	// end) or ErrClosed, and calls freed no more. It blocks, reconnecting
	// on its own after the store's server fails or restarts; notices sent
	// while it was not connected are lost. freed may be called from
	// several goroutines at once (an in-process store calls it from the
	// goroutine that freed the units); it must return quickly and must not
	// call the store. Several watches may run at once, each getting every
	// notice.
	WatchFreed(ctx context.Context, freed func(dimension string)) error
}
