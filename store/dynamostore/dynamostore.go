// Package dynamostore is Sluice's DynamoDB store: the table format
// of the Python and TypeScript SDKs, wire-compatible with them, over
// aws-sdk-go-v2 (a *dynamodb.Client the caller configures).
//
// # Table
//
// One table per environment, partition key vendor_dimension (S), TTL
// attribute ttl. A bucket row is keyed by its dimension ("openai#rpm") and
// holds the SDKs' attributes capacity, tokens, refill_rate,
// last_refill_at, cost_per_call, limit_type and version. tokens is written
// with exactly three decimals (millitokens/1000, "47.125") and
// last_refill_at as Unix seconds with millisecond decimals
// ("1709550002.250"), so both are exact for Sluice's integer math and
// readable by the other SDKs; refill_rate (tokens per second) is written as
// a decimal for them. Sluice also writes refill_amount, refill_period_ms
// (the exact fraction), max_debt, incarnation (a random id per creation, so
// that a lease never restores into a re-created namesake), holders (a map
// of the bucket's recorded leases: uuid → expiry in ms, plus the cost on a
// concurrent bucket; it gives Peek its lease count and the concurrent
// RETRY_IN hint without a Scan, and lets Reconcile restore a slot whose
// lease item DynamoDB's TTL process deleted first), last_op and, once the
// bucket has had a cooldown, cooldown_until_ms (bucket.State.Until, Unix
// ms; a row without it has none), once it has had a reservation,
// reserved_until_ms (bucket.State.Reserved), and on a concurrent bucket
// with waiters, waiters (its waiter queue, see queue.go).
// Rows written by the Python and TypeScript SDKs lack them: the refill fraction is then
// derived from refill_rate (see deriveRefill) and the rest defaults.
//
// A lease record is one item per dimension, lease#{dimension}#{uuid}, with
// the SDKs' dimension, cost, created_at, ttl (whole seconds, rounded up)
// and caller, plus lease_id, dims (all the lease's dimensions), expires_ms
// and created_ms; a reservation's also valid_ms, its valid instant, from
// which its TTL counts. A multi-dimension lease's items share the uuid and are
// written and deleted in the same transaction. On a concurrent dimension
// the item's cost is 0 and slot_cost holds it: the SDKs' reconciler, which
// restores an item's cost, must not restore a slot that Sluice restores
// from the bucket's holders. A recorded lease also has an index item,
// lease#{uuid} (see reuse.go), which makes lease ids unique across
// dimensions and finds a lease's dimensions in one read.
//
// # Paths
//
// The read-then-transact path (WithReadThenTransact) is the original algorithm: a consistent
// GetItem (BatchGetItem for several dimensions), no write when the quota is
// exhausted, then one TransactWriteItems conditioned on version =
// :expected plus the lease Puts. It always writes a lease record, as the
// SDKs do. The fast path (the default) remembers each dimension's last
// seen row and writes conditionally against it without reading; a lost
// condition returns the current row (ALL_OLD), from which the store decides
// again without another read. Pure requests/tokens acquisitions that do not
// ask for a record write no lease item. Either way a lost race ends, after
// the store's internal attempts, in store.ErrContention, which the client
// backs off from (25–200 ms) and retries. Every write of an absolute
// balance is conditioned on the version and on tokens as read, so that an
// increment written by the Python and TypeScript SDKs (which leave the version alone) is
// never erased; releases return slots as increments.
//
// # Clock
//
// DynamoDB has no server clock usable in expressions: every decision uses
// the Now of the request, i.e. the caller's clock, after aligning the row
// with it (bucket.Align, WithMaxSkew): a caller behind the row's refill
// timestamp decides at that timestamp, which never moves backwards; one
// more than the maximum skew behind is refused admission until its clock
// is within it (AcquireResult.Behind reports the lag), and its other
// operations apply at the timestamp. A host whose clock runs ahead can so
// stall the others for as long as it is ahead: keep hosts on NTP.
//
// # Errors
//
// Throttling, 5xx, timeouts and network errors, after the SDK's own retries,
// are returned as store.ErrUnavailable (the client's failure policy
// applies); a TransactionConflict cancellation is store.ErrContention.
// Configuration errors never match ErrUnavailable: a malformed endpoint
// (New), credentials that cannot be obtained (ErrCredentials), a missing
// table. A bucket row listing WithMaxLeasesPerBucket recorded leases
// refuses more with a *LeaseLimitError (ErrTooManyLeases).
package dynamostore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ontopix/sluice/store"
)

// Defaults.
const (
	// DefaultTimeout bounds one store operation, SDK retries included,
	// when its context carries no deadline (see WithTimeout).
	DefaultTimeout = 5 * time.Second
	// DefaultAttempts is how many conditional writes one fast-path
	// acquisition tries before answering store.ErrContention.
	DefaultAttempts = 3
	// cacheMax bounds the fast path's per-dimension cache and the lease
	// cache; when full, they are cleared.
	cacheMax = 100_000
)

// Store is the DynamoDB store. It is safe for concurrent use.
type Store struct {
	db         *dynamodb.Client
	table      string
	readFirst  bool
	timeout    time.Duration
	attempts   int
	skew       int64 // maximum clock skew, ms (see bucket.Align)
	skewSet    time.Duration
	maxLeases  int    // recorded leases one bucket row may list
	maxWaiters int    // waiter tickets one bucket row may list
	unchecked  bool   // WithUncheckedLeaseIDs
	nonce      int64  // random per Store: part of every ClientRequestToken
	usageTable string // WithUsageTable; "" means table + UsageTableSuffix
	closed     atomic.Bool

	mu     sync.Mutex
	cache  map[string]*bucketItem     // fast path: last seen row per dimension
	leases map[store.LeaseID][]string // lease → its dimensions, for Release/Extend
	rows   rowLocks                   // see lockRows
}

// Option configures a Store.
type Option func(*Store)

// WithReadThenTransact selects the original two-round-trip algorithm
// (consistent read, then a version-conditioned transaction with a lease
// record), as the Python and TypeScript SDKs acquire.
func WithReadThenTransact() Option { return func(s *Store) { s.readFirst = true } }

// WithSeedsPath selects the read-then-transact algorithm.
//
// Deprecated: use WithReadThenTransact.
func WithSeedsPath() Option { return WithReadThenTransact() }

// WithTimeout bounds each operation whose context carries no deadline,
// including the SDK's retries (default DefaultTimeout); a deadline the
// caller set (sluice.Client sets one from Config.OpTimeout) bounds the
// operation instead, shorter or longer. Each HTTP attempt is bounded by
// SDKAttemptTimeout too, when the client was built with ClientOptions.
func WithTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// WithAttempts sets how many conditional writes one fast-path acquisition
// tries (each decided from the row the previous one returned) before it
// answers store.ErrContention. Minimum 1.
func WithAttempts(n int) Option { return func(s *Store) { s.attempts = max(n, 1) } }

// WithMaxSkew sets the largest disagreement between callers' clocks that
// the store absorbs (see bucket.Align): a caller behind a bucket's refill
// timestamp by at most d decides at that timestamp; one further behind is
// refused admission until its clock is within d, and its other operations
// apply at the timestamp. Default store.DefaultMaxSkew (1 s);
// 1 ms to 1 h.
func WithMaxSkew(d time.Duration) Option {
	return func(s *Store) { s.skew = d.Milliseconds(); s.skewSet = d }
}

// WithUncheckedLeaseIDs lets an acquisition that writes no lease record (a
// single requests or tokens dimension without AcquireRequest.Record, on the
// fast path) skip the check that its lease id has no record. It is then one
// UpdateItem (1 write unit) instead of a transaction of the update and a
// ConditionCheck (4), and a denial of it reads no more than the rows; but a
// lease id reused from a recorded lease takes a second grant instead of
// being answered as the grant it was (or ErrLeaseInUse). Lease ids the
// client generates are never reused, so only a caller that chooses its own
// ids needs the check.
func WithUncheckedLeaseIDs() Option { return func(s *Store) { s.unchecked = true } }

// New returns a store on table through db. It does not create the table
// (see CreateTable) and does not close db.
func New(db *dynamodb.Client, table string, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, errors.New("dynamostore: nil *dynamodb.Client")
	}
	if len(table) < 3 || len(table) > 255 {
		return nil, fmt.Errorf("dynamostore: table name %q must be 3 to 255 characters", table)
	}
	if err := checkEndpoint(db); err != nil {
		return nil, fmt.Errorf("dynamostore: %w", err)
	}
	s := &Store{db: db, table: table, timeout: DefaultTimeout, attempts: DefaultAttempts,
		skew: store.DefaultMaxSkew.Milliseconds(), skewSet: store.DefaultMaxSkew, maxLeases: DefaultMaxLeasesPerBucket, maxWaiters: DefaultMaxWaitersPerBucket,
		cache: map[string]*bucketItem{}, leases: map[store.LeaseID][]string{}, nonce: int64(rand.Uint64() >> 1)}
	for _, o := range opts {
		o(s)
	}
	if err := store.ValidateMaxSkew(s.skewSet); err != nil {
		return nil, fmt.Errorf("dynamostore: %w", err)
	}
	if err := validateMaxLeases(s.maxLeases); err != nil {
		return nil, fmt.Errorf("dynamostore: %w", err)
	}
	if err := validateMaxWaiters(s.maxWaiters); err != nil {
		return nil, fmt.Errorf("dynamostore: %w", err)
	}
	if err := validateRowSize(s.maxLeases, s.maxWaiters); err != nil {
		return nil, fmt.Errorf("dynamostore: %w", err)
	}
	return s, nil
}

var _ store.CallerClock = (*Store)(nil)

// Store implements the optional operations of the contract too.
var (
	_ store.Queuer = (*Store)(nil)
	_ store.Cooler = (*Store)(nil)
	_ store.Syncer = (*Store)(nil)
)

// CallerClock implements store.CallerClock: every decision is made at the
// request's Now (see Clock in the package documentation), so a
// reservation is valid at its Now plus the wait answered.
func (s *Store) CallerClock() bool { return true }

// Close marks the store closed. It is idempotent and leaves db open.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// begin checks that the store is open and bounds a context without a
// deadline by the store's timeout (store.WithDefaultTimeout).
func (s *Store) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return ctx, func() {}, store.ErrClosed
	}
	c, cancel := store.WithDefaultTimeout(ctx, s.timeout)
	return c, cancel, nil
}

// remember caches a row for the fast path.
func (s *Store) remember(bi *bucketItem) {
	s.mu.Lock()
	if len(s.cache) >= cacheMax {
		clear(s.cache)
	}
	s.cache[bi.b.Name] = bi
	s.mu.Unlock()
}

func (s *Store) forget(name string) {
	s.mu.Lock()
	delete(s.cache, name)
	s.mu.Unlock()
}

func (s *Store) cached(name string) *bucketItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cache[name]
}

func (s *Store) rememberLease(id store.LeaseID, dims []string) {
	s.mu.Lock()
	if len(s.leases) >= cacheMax {
		clear(s.leases)
	}
	s.leases[id] = dims
	s.mu.Unlock()
}

func (s *Store) leaseDims(id store.LeaseID) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases[id]
}

func (s *Store) forgetLease(id store.LeaseID) {
	s.mu.Lock()
	delete(s.leases, id)
	s.mu.Unlock()
}

// requestToken derives a ClientRequestToken (at most 36 characters) from
// the lease id and the attempt's state, so that an SDK retry of the same
// attempt is applied once and a new attempt is never mistaken for it.
func requestToken(id store.LeaseID, parts ...int64) string {
	h := sha256.New()
	h.Write(id[:])
	for _, p := range parts {
		h.Write([]byte(strconv.FormatInt(p, 36) + ","))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// credentialsUnreachable reports a credentials provider's failure to reach
// its endpoint: a network error, or the endpoint's throttling or 5xx.
func credentialsUnreachable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		code := re.HTTPStatusCode()
		return code == 429 || code >= 500
	}
	return false
}

// classify maps an SDK error: throttling, 5xx, timeouts and transport
// errors become store.ErrUnavailable; a TransactionConflict cancellation
// becomes store.ErrContention; anything else (validation, a missing table,
// credentials that do not exist: configuration errors) is returned
// wrapped, never as store.ErrUnavailable. Credentials whose endpoint cannot
// be reached for now (a network error, its throttling or 5xx) are an
// outage, and still match ErrCredentials.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *credentialsError
	if errors.As(err, &ce) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		if credentialsUnreachable(ce.err) {
			// Credentials that exist but whose endpoint (STS, instance
			// metadata) cannot be reached for now: an outage.
			return store.Unavailable("dynamostore: "+op, err)
		}
		return fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for _, r := range tc.CancellationReasons {
			if r.Code != nil {
				switch *r.Code {
				case "TransactionConflict":
					return fmt.Errorf("%w: dynamostore: %s: %w", store.ErrContention, op, err)
				case "ThrottlingError", "ProvisionedThroughputExceeded":
					return store.Unavailable("dynamostore: "+op, err)
				}
			}
		}
		return fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ValidationException", "ConditionalCheckFailedException", "IdempotentParameterMismatchException",
			"SerializationException":
			return fmt.Errorf("dynamostore: %s: %w", op, err)
		case "TransactionConflictException":
			return fmt.Errorf("%w: dynamostore: %s: %w", store.ErrContention, op, err)
		}
		// A missing table (ResourceNotFoundException) is a client fault too:
		// a misconfiguration, reported as such rather than as an outage, so
		// that a fail-open client does not silently run without limits.
		if ae.ErrorFault() == smithy.FaultClient && !throttle(ae.ErrorCode()) {
			return fmt.Errorf("dynamostore: %s: %w", op, err)
		}
	}
	return store.Unavailable("dynamostore: "+op, err)
}

func throttle(code string) bool {
	switch code {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
		"TransactionInProgressException", "LimitExceededException":
		return true
	}
	return false
}

// reasons returns the cancellation reasons of a cancelled transaction, or
// nil when err is not one.
func reasons(err error) []types.CancellationReason {
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		return tc.CancellationReasons
	}
	return nil
}

func reasonIs(r types.CancellationReason, code string) bool {
	return r.Code != nil && *r.Code == code
}

func msDur(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
