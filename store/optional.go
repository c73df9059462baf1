package store

import "context"

// The optional capabilities of a store. A Store must implement the core
// operations only; a store that can do more implements the interfaces
// below too, and the client discovers each by type assertion, once, when
// it is created (sluice.New), in the manner of database/sql/driver's
// optional interfaces (QueryerContext and the like). Each capability has a
// documented fallback, so that a store without it is still correct:
//
//   - Queuer (Reserve, Cancel, Dequeue and the waiter queues of
//     AcquireRequest.Queue): without it, the client's waiters poll, as with
//     sluice.WithPolling: they acquire, sleep the RETRY_IN the store answered
//     (plus jitter) and try again, and are served in no particular order.
//   - Cooler (Cooldown): without it, sluice.Client.Cooldown and
//     CooldownFor return an error matching errors.ErrUnsupported and change
//     nothing.
//   - Syncer (Sync): without it, sluice.Client.Sync returns an error
//     matching errors.ErrUnsupported and changes nothing.
//   - FreedWatcher: without it, waiters in line poll for freed slots.
//   - Usager (PutUsage, ListUsage; see usage.go): without it, usage
//     history is not kept, and a recorder shows only its own process.
//   - InProcess and CallerClock tell the client how to call the store.
//
// A store that wraps another (to record, measure or inject faults) and
// implements an optional method by forwarding it returns an error
// matching errors.ErrUnsupported when the store it wraps lacks the
// method; the client takes that answer as the capability's absence too.

// Queuer is implemented by a store that lets callers wait in line:
// reservations on time-based dimensions (Reserve, Cancel) and waiter
// queues on concurrent ones (AcquireRequest.Queue, Dequeue). Every store
// in this module implements it.
//
// A store without it takes no tickets (BucketState.Waiters is 0) and may
// ignore AcquireRequest.Queue: the client sets Queue only for a store that
// implements Queuer, and otherwise polls.
type Queuer interface {
	Store

	// Reserve debits every time-based item of req now, even when the
	// balance is short, provided the reservation's wait is at most
	// req.MaxWait: it becomes valid at the instant every item's balance
	// would have covered it (bucket.Reserve; the latest over the items,
	// cooldowns included), which res.ValidAt reports, and the caller
	// proceeds then without asking again. All items are reserved or none:
	// when the wait is longer than MaxWait, or a balance would fall below
	// bucket.MinBalance, nothing changes and res carries the wait, so that
	// the caller fails fast or retries. A request whose Now is more than
	// the maximum skew behind an item's refill timestamp is refused as
	// Acquire refuses it (res.Behind, res.Wait the longest
	// bucket.SkewRetry).
	// A concurrent item is a *bucket.FieldError (CheckReservable), an
	// unknown dimension a *ConfigurationError and a cost above capacity a
	// *CostError, all before anything changes.
	//
	// A reservation is a lease whose TTL counts from ValidAt. With
	// req.Record the store writes a lease record (LeaseRecord.ValidAt set),
	// which can be listed, settled, released and cancelled by id; the lease
	// id rules of Acquire apply to it (a retry with the same items is
	// answered as the reservation it was, other items are ErrLeaseInUse).
	// res is owned by the caller and is overwritten; its Items slice is
	// reused when large enough.
	Reserve(ctx context.Context, req *ReserveRequest, res *ReserveResult) error

	// Cancel gives a reservation's tokens back before its valid instant
	// (bucket.Unreserve on each item: its cost minus what later
	// reservations relied on, capped at capacity). At or after the valid
	// instant it gives nothing back. A recorded reservation's record is
	// deleted in both cases (Cancelled true); a second Cancel finds no
	// record and reports Cancelled false with a nil error. For a
	// reservation without a record the caller passes its items and valid
	// instant, and must cancel it at most once.
	Cancel(ctx context.Context, req CancelRequest) (CancelResult, error)

	// Dequeue removes req.ID's tickets from the waiter queues of the named
	// concurrent dimensions (see AcquireRequest.Queue), as a waiter that
	// gives up does. Missing tickets and missing buckets are skipped; it is
	// idempotent.
	Dequeue(ctx context.Context, req DequeueRequest) error
}

// Cooler is implemented by a store that can start a cooldown on a bucket.
// Every store in this module implements it.
type Cooler interface {
	Store

	// Cooldown starts a cooldown on a time-based bucket, as after a vendor's
	// 429 with a retry-after, in one atomic write (see bucket.Cooldown):
	// the balance drops to zero if it was positive, nothing is granted
	// before req.Until, and from then on the bucket earns at its refill
	// rate. A running cooldown that ends later is kept. The cooldown lasts
	// req.Until − req.Now from the decision time: Now, or the bucket's
	// refill timestamp for a caller behind it (bucket.Align), or,
	// in a store that keeps its own clock, that clock's now.
	Cooldown(ctx context.Context, req CooldownRequest) (CooldownResult, error)
}

// Syncer is implemented by a store that can lower a bucket's balance to
// what a vendor reports. Every store in this module implements it.
type Syncer interface {
	Store

	// Sync lowers a time-based bucket's balance to req.Remaining tokens, as
	// reported by a vendor's rate-limit headers, in one atomic write (see
	// bucket.Sync). It never raises the balance.
	Sync(ctx context.Context, req SyncRequest) (SyncResult, error)
}
