package store

import (
	"bytes"
	"time"

	"github.com/ontopix/sluice/bucket"
)

// Limits of reservations and waiter queues.
const (
	// MaxReserveWait is the longest wait a reservation may take
	// (bucket.MaxReserveMs).
	MaxReserveWait = bucket.MaxReserveMs * time.Millisecond
	// MaxQueueTTL is the longest life of a waiter's ticket between two
	// renewals.
	MaxQueueTTL = time.Minute
)

// ReserveRequest is the input of Store.Reserve.
type ReserveRequest struct {
	// Now is the decision time (see the package comment on clocks).
	Now time.Time
	// Items lists the requests or tokens dimensions to reserve, each at
	// most once. 1..MaxItems.
	Items []Item
	// ID is the reservation's lease id. Required.
	ID LeaseID
	// Caller names the reserving service, for lease records and logs.
	Caller string
	// TTL is the lease's lifetime counted from its valid instant: it
	// expires at ValidAt+TTL. 1 ms to MaxTTL.
	TTL time.Duration
	// MaxWait is the longest wait the caller accepts, 0 to MaxReserveWait:
	// a reservation that would be valid later changes nothing. Zero makes
	// Reserve an Acquire of time-based items.
	MaxWait time.Duration
	// Record asks for a lease record (see AcquireRequest.Record).
	Record bool
	// Op identifies this call (see AcquireRequest.Op).
	Op LeaseID
}

// ReserveResult is the output of Store.Reserve.
type ReserveResult struct {
	// Granted reports that every item was debited: the reservation is
	// made and valid at ValidAt.
	Granted bool
	// Wait is the wait from the decision time: until ValidAt when
	// granted; otherwise the wait that was too long (or, when a balance
	// would have fallen below bucket.MinBalance, a shorter wait after which
	// asking again may succeed; Wait <= MaxWait tells the two apart).
	Wait time.Duration
	// ValidAt is the instant the reservation becomes valid, when granted,
	// in the store's clock: the decision time plus Wait.
	ValidAt time.Time
	// Recorded reports that a lease record was written.
	Recorded bool
	// ExpiresAt is the lease's expiry, ValidAt+TTL, when granted.
	ExpiresAt time.Time
	// Items has one entry per requested item, in request order. Remaining
	// is the balance after the debit (negative while the reservation is
	// pending) or, on a denial, the balance available now; RetryIn is the
	// item's own wait.
	Items []ItemResult
	// Behind is, on a refusal because Now is more than the store's maximum
	// skew behind a bucket's refill timestamp, how far behind the furthest
	// such bucket it is (see bucket.Align); 0 otherwise.
	Behind time.Duration
}

// CancelRequest is the input of Store.Cancel.
type CancelRequest struct {
	// Now is the time of the cancellation.
	Now time.Time
	// ID is the reservation's lease id.
	ID LeaseID
	// Recorded says whether the reservation has a lease record; the store
	// then reads its items and valid instant from the record.
	Recorded bool
	// Items are the reservation's items at the costs the lease holds now
	// (its resolved costs, as adjustments left them); used only when
	// Recorded is false.
	Items []Item
	// ValidAt is the reservation's valid instant as the store reported it;
	// used only when Recorded is false.
	ValidAt time.Time
	// Hint optionally names one of the lease's dimensions (see
	// ReleaseRequest.Hint).
	Hint string
	// Op identifies this call, so that it gives back at most once and a
	// resend of it is answered as the call was (see OpWindow); zero as in
	// AdjustRequest.Op.
	Op LeaseID
}

// CancelResult is the output of Store.Cancel.
type CancelResult struct {
	// Cancelled reports, for a recorded reservation, that this call found
	// and deleted its record; for one without, that it was still pending.
	Cancelled bool
	// Returned lists, per item in the reservation's order, what went back
	// to the bucket; empty when nothing did.
	Returned []Returned
}

// Returned is what a cancelled reservation gave back to one bucket.
type Returned struct {
	// Dimension names the bucket.
	Dimension string
	// Amount is the balance given back, in millitokens (bucket.Unreserve):
	// at most the item's cost, less what later reservations relied on.
	Amount int64
}

// DequeueRequest is the input of Store.Dequeue.
type DequeueRequest struct {
	// Now is the time of the request.
	Now time.Time
	// ID is the waiter's lease id, which names its tickets.
	ID LeaseID
	// Dimensions names the concurrent dimensions it waited on.
	// 1..MaxItems.
	Dimensions []string
}

// CheckReservable rejects reserving a concurrent bucket: a slot is held,
// not earned back over time, so it has no valid instant to reserve; a
// waiter queues for it instead (AcquireRequest.Queue).
func (b *Bucket) CheckReservable() error {
	if b.Type == bucket.Concurrent {
		return invalid("dimension", b.Name, "is a concurrent dimension; reservations apply to requests and tokens limits (wait in line with a queued acquisition)")
	}
	return nil
}

// Ticket is a waiter's place in a concurrent dimension's queue: tickets
// are served in (At, ID) order (ID in byte order, which is the order of
// its canonical string), and one whose Expires is at or before the
// decision time is dead and ignored. Stores may keep tickets in any form
// that gives the same order.
type Ticket struct {
	// ID is the waiter's lease id.
	ID LeaseID
	// At is the decision time, in Unix milliseconds, at which the ticket
	// was first taken.
	At int64
	// Expires is the ticket's expiry in Unix milliseconds.
	Expires int64
	// Cost is the waiter's cost on the ticket's dimension, in tokens: what
	// the ticket holds back from the requests behind it. A ticket written
	// without one (by an older version) counts as 1.
	Cost int64
}

// Before reports whether ticket t is served before u.
func (t Ticket) Before(u Ticket) bool {
	if t.At != u.At {
		return t.At < u.At
	}
	return bytes.Compare(t.ID[:], u.ID[:]) < 0
}

// NotReservation returns the error for cancelling a lease that Acquire
// granted: only a reservation can be cancelled; a lease is released.
func NotReservation(id LeaseID) error {
	return invalid("lease_id", id.String(), "is a lease granted by an acquisition, not a reservation; release it instead of cancelling it")
}
