package sluice

import (
	"log/slog"
	"time"

	"github.com/ontopix/sluice/store"
)

// Option configures a Client.
type Option func(*Client)

// WithConfig replaces the client's Config (default: DefaultConfig()).
// Start from DefaultConfig or ConfigFromEnv and change what differs.
func WithConfig(c Config) Option { return func(cl *Client) { cl.cfg = c } }

// WithClock sets the clock used for every decision (default: SystemClock).
func WithClock(c Clock) Option { return func(cl *Client) { cl.clock = c } }

// WithLogger sets the structured logger for the client's events
// (acquire.granted, acquire.reserved, acquire.retry_in,
// acquire.contention_retry, acquire.degraded, slot.timeout,
// slot.renew_failed, slot.lease_lost, slot.release_failed,
// slot.release_abandoned, slot.cancelled, slot.cancel_failed,
// slot.dequeue_failed, release.ok, settle, penalize.applied,
// cooldown.applied, bucket.recreated (WithBuckets), and sync.applied at
// debug level).
// Keys are snake_case and durations are durations; a
// settle event carries dimension, estimate and actual (tokens), applied
// (the balance change in tokens, negative for a refund) and late.
// Default: discard.
func WithLogger(l *slog.Logger) Option { return func(cl *Client) { cl.log = l } }

// AcquireOption configures one acquisition.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	cost      int64
	costGiven bool
	caller    string
	ttl       time.Duration
	record    bool
	// polling makes Wait and the calls built on it poll (WithPolling).
	polling bool
	// attempts, when set, receives the wait's attempt count
	// (WithAttemptCount).
	attempts *int
	// id and queue, when set, make the acquisition take a waiter's ticket
	// under id (store.AcquireRequest.Queue); the queued wait sets them.
	id    store.LeaseID
	queue time.Duration
}

// WithCost sets the cost of a single-dimension Acquire, in tokens (>= 1).
// Without it the bucket's cost per call applies. AcquireMany ignores it;
// each Request carries its own cost.
func WithCost(n int64) AcquireOption {
	return func(o *acquireOptions) { o.cost, o.costGiven = n, true }
}

// WithCaller names the caller on this lease, overriding the client default.
func WithCaller(name string) AcquireOption { return func(o *acquireOptions) { o.caller = name } }

// WithTTL sets this lease's lifetime, overriding Config.LeaseTTL.
func WithTTL(d time.Duration) AcquireOption { return func(o *acquireOptions) { o.ttl = d } }

// WithRecord asks the store to write a lease record even when no dimension
// is concurrent, so that the lease shows in listings (Client.Leases) and can
// be released by id from another process (Client.ReleaseLease). Concurrent
// acquisitions are always recorded.
func WithRecord() AcquireOption { return func(o *acquireOptions) { o.record = true } }

// WithPolling makes this Wait, Slot or WithSlot poll instead of waiting in
// line: ask, sleep the RETRY_IN answer plus jitter, and ask again until
// granted or the wait's bound passes. Whoever asks first after a refill
// wins, so a large request can be overtaken by small ones for as long as
// they keep coming; a polling wait never fails fast. Acquire and
// AcquireMany ignore it.
func WithPolling() AcquireOption { return func(o *acquireOptions) { o.polling = true } }

// WithAttemptCount makes Wait, Slot, SlotMany, WithSlot and WithSlotMany
// store in *n, before they return, how many acquisitions or reservations
// the wait made (WaitEvent.Attempts), whether it got a slot or not: 0 when
// it failed before asking the store, 1 for a slot granted or reserved at
// the first call. Acquire and AcquireMany ignore it. A nil n is ignored.
// The caller owns n; concurrent waits must not share it.
func WithAttemptCount(n *int) AcquireOption {
	return func(o *acquireOptions) {
		if n != nil {
			*n = 0 // a call refused before its wait made no attempt
		}
		o.attempts = n
	}
}
