// Package store defines the interface implemented by Sluice backends:
// memory, Redis, DynamoDB and PostgreSQL. Application code should use
// package sluice; this package is for implementing a store.
//
// The contract is operation-level, in the manner of database/sql/driver:
// each method is one atomic operation on the store, and the caller passes
// the time (Now) so that decisions are deterministic in tests. A store that
// keeps its own clock (Redis TIME, PostgreSQL clock_timestamp()) documents
// when it ignores Now. Callers' clocks may disagree: every bucket
// computation first aligns Now with the bucket's refill timestamp
// (bucket.Align, with the store's maximum skew, DefaultMaxSkew unless
// configured), which never moves backwards. A caller behind it decides at
// it; one behind by more than the maximum skew is refused admission
// (Acquire, Reserve) with the wait until its clock is within the skew,
// and its other operations apply at the timestamp. Costs and
// deltas are whole tokens; balances are millitokens.
//
// Requests reach a store already validated and defaulted by the portable
// layer (sluice.Client): Now is in range; names, costs, TTLs, callers,
// lease ids, deltas, factors, bucket configurations, duplicates and the
// limits below are checked; Poll and Limit are filled in. The portable
// layer also retries ErrContention with backoff and sorts and truncates
// listings. A store
// keeps only the checks that need its stored state: an unknown dimension
// (*ConfigurationError), a cost above capacity (Bucket.ResolveCost),
// adjusting or penalizing a concurrent bucket (Bucket.CheckAdjustable,
// Bucket.CheckPenalizable), a refund above what a lease holds
// (AdjustHeld), a lease's existence and expiry, a lease id in use
// (SameItems) and a change of limit type (CheckTypeChange).
//
// The caller's context owns the deadline of every operation: an operation
// ends, with an error matching ErrUnavailable (or the context's error),
// no later than the context's deadline, retries inside its driver
// included. sluice.Client sets that deadline from Config.OpTimeout, or
// passes on the caller's own when it is sooner. A store's own timeout
// (WithTimeout in redisstore, pgstore and dynamostore) is only a default:
// it bounds an operation whose context carries no deadline, so that a
// direct caller with context.Background is never blocked by a hung
// server, and never shortens or lengthens a deadline the context has. A
// store keeps a timeout of its own only for work no caller's context
// covers, and documents it (pgstore's cleanup after a cancelled
// statement, a background watch's reconnections). A store whose driver
// does not stop at a context's deadline (go-redis built without
// ContextTimeoutEnabled) stops waiting for it at the deadline itself.
//
// The conformance suite in store/storetest is the definition of correct:
// every implementation must pass it against its real server.
//
// Implementations must be safe for concurrent use by multiple goroutines.
package store

import (
	"context"
	"time"

	"github.com/ontopix/sluice/bucket"
)

// Store is a backend holding buckets and leases: the core operations
// every store implements.
//
// A store may also implement optional capabilities, which the client
// discovers by type assertion when it is created (see optional.go):
// Queuer (reservations and waiter queues; without it waiters poll),
// Cooler (Cooldown), Syncer (Sync), FreedWatcher (it tells clients at once
// that units of a concurrent dimension were freed anywhere in the fleet;
// without it their waiters poll), InProcess (it never blocks on I/O) and
// CallerClock.
type Store interface {
	// Acquire debits every item of req or none of them (all-or-nothing).
	// A grant fills res with Granted and, when the store wrote a lease record
	// (see AcquireRequest.Record), Recorded. A denial fills res.RetryIn with
	// the longest wait among the denied items and changes nothing. A
	// request whose Now is more than the store's maximum clock skew behind
	// the refill timestamp of one of its time-based buckets is refused
	// (after the check for a retry below), changing nothing: res.Behind is
	// the lag, each such item's RetryIn is bucket.SkewRetry, every other
	// item's 0, and res.RetryIn the longest. An unknown
	// dimension (*ConfigurationError) and a cost above capacity
	// (*CostError) are returned before anything changes.
	//
	// When req.ID already has a lease record (expired or not), the store
	// changes nothing: if the record holds the same dimensions at the same
	// resolved costs (SameItems), the request is a retry and res is the
	// grant it was (Recorded, the record's ExpiresAt, the balances
	// available now); otherwise the error matches ErrLeaseInUse.
	//
	// res is owned by the caller and is overwritten; its Items slice is
	// reused when large enough.
	Acquire(ctx context.Context, req *AcquireRequest, res *AcquireResult) error

	// Release deletes a lease record and returns the cost of its concurrent
	// items to their buckets, capped at capacity, exactly once: a second
	// Release, or a Release after the reconciler reclaimed the lease, finds
	// no record and reports Released false with a nil error.
	Release(ctx context.Context, req ReleaseRequest) (ReleaseResult, error)

	// Adjust settles an estimate on one requests or tokens item of a lease
	// (see AdjustRequest).
	Adjust(ctx context.Context, req AdjustRequest) (Settlement, error)

	// Extend moves a recorded lease's expiry to Now+TTL and returns it. It
	// fails with ErrLeaseExpired when the lease has already expired and with
	// ErrUnknownLease when there is no record.
	Extend(ctx context.Context, req ExtendRequest) (time.Time, error)

	// Penalize multiplies a time-based bucket's available tokens by
	// FactorMilli/1000 in one atomic write.
	Penalize(ctx context.Context, req PenalizeRequest) (Penalty, error)

	// Peek returns the state of the named buckets at req.Now without
	// changing them, in the order asked. Each bucket's state is read
	// atomically; several buckets are not promised to be one snapshot.
	Peek(ctx context.Context, req PeekRequest) ([]BucketState, error)

	// Reconcile processes up to req.Limit expired lease records: it returns
	// the cost of concurrent ones (capacity-guarded), deletes them all, and
	// deletes expired records whose bucket is gone (orphans; an unexpired
	// orphan is left until it expires, so its holder can still release it).
	// It is idempotent. Each lease is reclaimed atomically, exactly once;
	// concurrent reconcilers share the expired leases between them, so a
	// batch is not one atomic step, and a lease extended or released
	// while the batch runs is left alone.
	Reconcile(ctx context.Context, req ReconcileRequest) (ReconcileResult, error)

	// PutBucket creates or reconfigures a bucket. An existing bucket keeps
	// its balance (see bucket.Reconfigure) unless req.Reset is true, which
	// fills it to capacity. A new bucket starts full, or, with req.Empty and a
	// time-based type, with nothing (req.StartTokens). An existing bucket's
	// limit type cannot change to or from concurrent (CheckTypeChange).
	// req.IfAbsent and req.IfMatch make the write conditional, in the same
	// atomic step; a failed condition is a *ConflictError and changes
	// nothing.
	PutBucket(ctx context.Context, req PutBucketRequest) error

	// DeleteBucket removes a bucket. Its lease records become orphans that
	// Reconcile deletes; releasing one restores nothing, even into a bucket
	// re-created under the same name. Deleting a missing bucket returns a
	// *ConfigurationError.
	DeleteBucket(ctx context.Context, req DeleteBucketRequest) error

	// ListBuckets returns every bucket's state at req.Now, in any order
	// (the caller sorts them by name).
	ListBuckets(ctx context.Context, req ListBucketsRequest) ([]BucketState, error)

	// Leases lists lease records matching q. The store may return them in
	// any order and may ignore q.Limit: the caller sorts them by expiry and
	// truncates the list.
	Leases(ctx context.Context, q LeaseQuery) ([]LeaseRecord, error)

	// Close releases the store's resources. Operations after Close return
	// ErrClosed. It does not close a client the caller passed in.
	Close() error
}

// OpWindow is how long a store whose driver may send a request twice
// recognises the resend. A driver sends a request again when its reply is
// lost (go-redis after a broken connection or a read timeout, the AWS SDK
// after a 5xx or a reset), within one call's bound, although the server
// may have applied it. A store applies each request at most once however
// often its driver sends it, and answers a resend with the answer it gave
// or an equivalent one (the same change, reported the same way).
//
// The Op of Acquire, Reserve, Adjust, Penalize, Release and Cancel
// requests identifies the call: the client sets a fresh one per call and
// keeps it across its own retries. A store may key on it (redisstore
// keeps each reply under it for OpWindow, and answers a second send of
// the same Op as the first: see storetest.Harness.DedupesOps), rely on its
// driver's own mechanism (DynamoDB's ClientRequestToken), or need nothing
// (pgx never sends a statement twice; memstore runs in process). Extend,
// Cooldown, Sync, PutBucket without Reset, Dequeue and Reconcile leave the
// same state when applied twice with the same request (a second Cooldown
// or Sync may report the balance the first left as Before); a PutBucket
// with Reset and a DeleteBucket carry no Op, and a store protects them
// from its driver's resends on its own.
const OpWindow = time.Minute

// InProcess is implemented by a store whose operations run in the caller's
// process and never block on I/O or on a lock held across I/O, such as
// store/memstore. The client then calls it without bounding each call by
// its operation timeout, which would cost a timer and a context per call
// for a bound that can never be reached. A store that reaches a server
// must not implement it.
type InProcess interface {
	Store
	// InProcess marks the store; it does nothing.
	InProcess()
}

// CallerClock is implemented by a store that may decide every request at
// the request's Now, the caller's clock, never at a clock of its own
// (store/dynamostore always does). A reservation such a store grants is
// valid at req.Now plus the answered Wait by the caller's clock, however
// late the answer arrives: the client then sleeps until that instant,
// rather than for Wait from the answer's arrival, which a store deciding
// at its own, later, instant needs and which makes every reservation late
// by its call's duration.
type CallerClock interface {
	Store
	// CallerClock reports whether the store decides at the request's Now.
	CallerClock() bool
}

// Bucket is a named bucket configuration.
type Bucket struct {
	// Name is the dimension, e.g. "openai#rpm".
	Name string
	bucket.Config
}

// Item is one dimension of an acquisition.
type Item struct {
	// Dimension names the bucket.
	Dimension string
	// Cost in tokens; 0 means the bucket's cost per call.
	Cost int64
}

// AcquireRequest is the input of Store.Acquire.
type AcquireRequest struct {
	// Now is the decision time (see the package comment on clocks).
	Now time.Time
	// Items lists the dimensions to debit, each at most once. 1..MaxItems.
	Items []Item
	// ID is the lease's id, chosen by the caller so that a retried write is
	// idempotent. Required.
	ID LeaseID
	// Caller names the acquiring service, for lease records and logs.
	Caller string
	// TTL is the lease's lifetime: it expires at Now+TTL. 1 ms to MaxTTL.
	TTL time.Duration
	// Record asks for a lease record even when no item is concurrent, so
	// that the lease can be listed and settled across processes. A record is
	// always written when an item is concurrent.
	Record bool
	// Poll caps the RETRY_IN hint of a denied concurrent item (the client
	// fills in DefaultPoll).
	Poll time.Duration
	// Queue, when not zero, makes the request wait in line on its
	// concurrent items: a denial takes a ticket for ID in each concurrent
	// item's waiter queue, or renews the one it has, expiring at Now+Queue
	// (1 ms to MaxQueueTTL); a ticket keeps its place (the Now at which it
	// was taken, then ID) across renewals, and holds the request's cost on
	// that item. Whatever Queue says, a request is granted a concurrent
	// item only when its free balance covers the request's cost plus the
	// costs of the live tickets (those expiring after Now) of others ahead
	// of it: waiters are served first come, first served as far as the
	// slots allow, so a waiter behind others is granted a free slot that
	// they do not need, a large request is never overtaken by more than the
	// slots it cannot use yet, a dead ticket holds back only its own cost
	// until it expires, and a one-shot acquisition (which has no ticket:
	// every live ticket is ahead of it) does not overtake waiters. A
	// concurrent item that could be granted reports RetryIn 0 even when
	// another item was short. A grant removes the
	// request's tickets. Tickets of all of a request's items are taken in
	// one atomic step with one place, so requests on several concurrent
	// dimensions are ordered the same way in every queue and cannot
	// deadlock. Zero for a request without concurrent items is ignored.
	// Waiter queues are part of the optional Queuer: the client sets
	// Queue only for a store that implements it.
	Queue time.Duration
	// Op identifies this call, so that a grant without a lease record is
	// debited at most once however often the call is sent (see OpWindow;
	// a record makes a resend a retry by ID); zero as in AdjustRequest.Op.
	Op LeaseID
}

// AcquireResult is the output of Store.Acquire.
type AcquireResult struct {
	// Granted reports that every item was debited.
	Granted bool
	// RetryIn is the wait before retrying, when not granted: exact for
	// time-based items, a hint (at most the poll interval) for concurrent.
	RetryIn time.Duration
	// Recorded reports that a lease record was written.
	Recorded bool
	// ExpiresAt is the lease's expiry, when granted.
	ExpiresAt time.Time
	// Items has one entry per requested item, in request order.
	Items []ItemResult
	// Ahead is, on a denial, the largest number of live tickets ahead of
	// the request's own in the queues of its concurrent items (0 at the
	// head, and when the request has no ticket nor concurrent item).
	Ahead int
	// Behind is, on a refusal because Now is more than the store's maximum
	// skew behind a bucket's refill timestamp, how far behind the furthest
	// such bucket it is (see bucket.Align); 0 otherwise.
	Behind time.Duration
}

// ItemResult is the outcome of one item of an acquisition.
type ItemResult struct {
	// Dimension names the bucket.
	Dimension string
	// Type is the bucket's limit type.
	Type bucket.LimitType
	// Cost is the cost in tokens that was (or would have been) charged.
	Cost int64
	// Capacity is the bucket's capacity in tokens.
	Capacity int64
	// Remaining is the balance in millitokens after the grant, or, on a
	// denial, the balance available now.
	Remaining int64
	// RetryIn is this item's own wait; 0 when it could have been granted.
	RetryIn time.Duration
	// Charged is, for a granted reservation (Store.Reserve), the bucket's
	// settlement counter (bucket.State.Charged) read atomically with the
	// debit; 0 otherwise. Compared with BucketState.Charged at the valid
	// instant (bucket.ChargedSince), it gives the debt settled since, which
	// the reservation must wait out (bucket.ChargeDelay).
	Charged int64
}

// ReleaseRequest is the input of Store.Release.
type ReleaseRequest struct {
	// Now is the time of the release.
	Now time.Time
	// ID is the lease.
	ID LeaseID
	// Hint optionally names one of the lease's dimensions. A store that
	// partitions lease records (Redis Cluster, by vendor) uses it to reach
	// the record in one round trip; an empty hint costs extra round trips.
	// A hint that is not one of the lease's dimensions may make the store
	// miss the record.
	Hint string
	// Op identifies this call, so that a resend of it is answered as the
	// call was (see OpWindow), while another Release of the lease finds no
	// record; zero as in AdjustRequest.Op.
	Op LeaseID
}

// ReleaseResult is the output of Store.Release.
type ReleaseResult struct {
	// Released reports that a record was found and deleted by this call.
	Released bool
	// Restored lists what concurrent items gave back.
	Restored []Restored
}

// Restored is one concurrent item's cost returned to its bucket.
type Restored struct {
	// Dimension names the bucket.
	Dimension string
	// Cost is the lease's cost in tokens.
	Cost int64
	// Capped reports that the capacity guard limited the restore (the
	// SDKs' reconciler calls it already_capped).
	Capped bool
}

// AdjustRequest is the input of Store.Adjust.
//
// A positive Delta charges more tokens (the balance may go into debt, at
// most the bucket's max debt below zero or below a balance already in
// debt: debt is never forgiven), and the lease's cost grows by the whole tokens actually
// charged (HeldAfter); it is applied even after the lease expired, since
// usage reported late still counted at the vendor. A negative one refunds,
// at most the lease's cost for that dimension, and fails with
// ErrLeaseExpired once the lease has expired. When the lease has a record,
// the record's cost is the bound and is updated. When the lease was never
// recorded (Recorded false), Held, the cost the caller holds, is the bound
// and ExpiresAt its expiry. Concurrent items cannot be adjusted, and a dimension the lease
// does not hold is a *bucket.FieldError (ErrInvalid).
type AdjustRequest struct {
	// Now is the time of the adjustment.
	Now time.Time
	// ID is the lease.
	ID LeaseID
	// Recorded says whether the lease has a record in the store.
	Recorded bool
	// Dimension is the item to adjust.
	Dimension string
	// Delta in tokens: positive charges, negative refunds. Non-zero.
	Delta int64
	// Held is the caller's current cost for Dimension, in tokens; used only
	// when Recorded is false.
	Held int64
	// ExpiresAt is the lease's expiry; used only when Recorded is false.
	ExpiresAt time.Time
	// Op identifies this adjustment, so that it is applied at most once
	// (see OpWindow); a caller that sends it again sends the same Op. The
	// client sets it; zero leaves a store to protect its own resends only.
	Op LeaseID
}

// Settlement is the output of Store.Adjust.
type Settlement struct {
	// Held is the lease's cost for the dimension after the adjustment.
	Held int64
	// Applied is the change to the balance in millitokens (positive for a
	// charge); it differs from Delta*1000 when the floor or capacity clamped it.
	Applied int64
	// Remaining is the balance in millitokens afterwards.
	Remaining int64
}

// ExtendRequest is the input of Store.Extend.
type ExtendRequest struct {
	// Now is the time of the extension.
	Now time.Time
	// ID is the lease.
	ID LeaseID
	// TTL is the new lifetime from Now.
	TTL time.Duration
	// Hint optionally names one of the lease's dimensions (see
	// ReleaseRequest.Hint).
	Hint string
}

// PenalizeRequest is the input of Store.Penalize.
type PenalizeRequest struct {
	// Now is the time of the penalty.
	Now time.Time
	// Dimension names a requests or tokens bucket.
	Dimension string
	// FactorMilli is the factor in thousandths, 0..1000 (800 = ×0.8).
	FactorMilli int64
	// Op identifies this penalty, so that it is applied at most once (see
	// OpWindow); zero as in AdjustRequest.Op.
	Op LeaseID
}

// Penalty is the output of Store.Penalize.
type Penalty struct {
	// Before and After are the balances in millitokens.
	Before, After int64
}

// CooldownRequest is the input of Store.Cooldown.
type CooldownRequest struct {
	// Now is the time of the cooldown.
	Now time.Time
	// Dimension names a requests or tokens bucket.
	Dimension string
	// Until is the cooldown's end, after Now and at most MaxCooldown later.
	Until time.Time
}

// CooldownResult is the output of Store.Cooldown.
type CooldownResult struct {
	// Before and After are the balances in millitokens.
	Before, After int64
	// Until is the cooldown's end in Unix milliseconds, in the store's
	// clock: req.Until or a later end already running.
	Until int64
}

// SyncRequest is the input of Store.Sync.
type SyncRequest struct {
	// Now is the time of the sync.
	Now time.Time
	// Dimension names a requests or tokens bucket.
	Dimension string
	// Remaining is what the vendor reports as left, in tokens, 0..10^12.
	Remaining int64
}

// SyncResult is the output of Store.Sync.
type SyncResult struct {
	// Before and After are the balances in millitokens.
	Before, After int64
}

// BucketState is a bucket's configuration and state at a point in time.
type BucketState struct {
	Bucket
	// Tokens is the balance in millitokens at Now, refilled.
	Tokens int64
	// LastRefill is the refill timestamp, in Unix milliseconds, that goes
	// with Tokens: the pair is the bucket's state refilled to Now, so
	// bucket.RetryIn on it gives exact waits.
	LastRefill int64
	// CooldownUntil is the end of the bucket's last cooldown, in Unix
	// milliseconds (bucket.State.Until); 0 when it never had one.
	CooldownUntil int64
	// ReservedUntil is the latest valid instant of a reservation on the
	// bucket, in Unix milliseconds (bucket.State.Reserved); 0 when it never
	// had one.
	ReservedUntil int64
	// Charged is the bucket's settlement counter (bucket.State.Charged):
	// the wrapping net change that settlements after the fact (Adjust,
	// Sync, Penalize, Cooldown) made to its balance. Only differences
	// between two readings mean anything (bucket.ChargedSince).
	Charged int64
	// Waiters counts the live tickets in a concurrent bucket's waiter
	// queue (see AcquireRequest.Queue).
	Waiters int
	// ActiveLeases counts this bucket's lease records, expired or not.
	ActiveLeases int
	// NextExpiry is the earliest expiry among those records (zero if none).
	NextExpiry time.Time
	// Now is the time the state was computed at (the store's clock, if it
	// uses its own).
	Now time.Time
}

// PeekRequest is the input of Store.Peek.
type PeekRequest struct {
	// Now is the time the states are computed at.
	Now time.Time
	// Dimensions names the buckets, at least one.
	Dimensions []string
}

// PutBucketRequest is the input of Store.PutBucket.
type PutBucketRequest struct {
	// Now is the time of the change.
	Now time.Time
	// Bucket is the new configuration, validated.
	Bucket Bucket
	// Reset fills an existing bucket to capacity instead of keeping its
	// balance.
	Reset bool
	// IfAbsent makes the write a creation only: when the bucket exists,
	// nothing changes and the error is a *ConflictError (Found true). Of
	// several writers creating the same bucket at once, exactly one
	// succeeds; the others never refill what it created.
	IfAbsent bool
	// IfMatch, when not nil, makes the write apply only to an existing
	// bucket whose configuration is the same (SameConfig) as *IfMatch,
	// checked atomically with the write: otherwise nothing changes and the
	// error is a *ConflictError. It is how a writer changes a bucket it read
	// without undoing another writer's change. IfAbsent and IfMatch are
	// exclusive.
	IfMatch *bucket.Config
	// Empty makes a new time-based bucket start with a balance of zero
	// (its refill timestamp Now) instead of full, so that it admits only
	// what it earns from then on. It is how a client re-creates a bucket
	// the store lost: the fleet spent that bucket's tokens before the loss,
	// and a full re-creation would admit up to a capacity more than the
	// limit. It is ignored for an existing bucket and for a concurrent one.
	Empty bool
}

// StartTokens is the balance, in millitokens, of the bucket req creates
// when none exists: zero for a time-based bucket with Empty, otherwise
// its capacity.
func (req PutBucketRequest) StartTokens() int64 {
	if req.Empty && req.Bucket.Config.Type != bucket.Concurrent {
		return 0
	}
	return req.Bucket.Config.Capacity * bucket.Milli
}

// DeleteBucketRequest is the input of Store.DeleteBucket.
type DeleteBucketRequest struct {
	// Name is the bucket's name.
	Name string
}

// ListBucketsRequest is the input of Store.ListBuckets.
type ListBucketsRequest struct {
	// Now is the time the states are computed at.
	Now time.Time
}

// ReconcileRequest is the input of Store.Reconcile.
type ReconcileRequest struct {
	// Now is the time leases are judged expired against.
	Now time.Time
	// Limit bounds the number of lease records processed, at least 1
	// (the client fills in DefaultReconcileLimit).
	Limit int
}

// ReconcileResult reports one reconcile batch; field names follow the SDKs'
// reconciler.
type ReconcileResult struct {
	// Restored counts expired leases processed (cost returned or record
	// cleaned up), as the SDKs' reconciler's "restored".
	Restored int
	// Reclaimed counts concurrent leases whose cost went back to the bucket.
	Reclaimed int
	// AlreadyCapped counts concurrent leases whose restore the capacity
	// guard limited.
	AlreadyCapped int
	// Orphans counts records deleted because their bucket is gone.
	Orphans int
	// Dimensions lists, sorted, the dimensions that had expired leases.
	Dimensions []string
	// More reports that expired records remain beyond Limit.
	More bool
}

// LeaseQuery selects lease records for Store.Leases.
type LeaseQuery struct {
	// Now is the time expiry is judged against.
	Now time.Time
	// Dimension, when set, keeps leases that include it.
	Dimension string
	// ExpiredOnly keeps leases whose expiry is at or before Now.
	ExpiredOnly bool
	// Limit bounds the result; 0 means no bound.
	Limit int
}

// LeaseRecord is a lease as a store records it.
type LeaseRecord struct {
	// ID is the lease's id.
	ID LeaseID
	// Items are the dimensions and their current costs in tokens.
	Items []Item
	// Caller names who acquired it.
	Caller string
	// CreatedAt and ExpiresAt bound its life.
	CreatedAt, ExpiresAt time.Time
	// ValidAt is a reservation's valid instant (see Store.Reserve); zero
	// for a lease granted by Acquire.
	ValidAt time.Time
}
