// Package pgstore is Sluice's PostgreSQL store: buckets and leases in two
// tables of a schema of their own (default "sluice"), over a pgx v5 pool,
// for teams that already run PostgreSQL.
//
// Every operation is one round trip: a single statement, usually a call of
// one PL/pgSQL function that Migrate installs. Functions that touch several
// buckets lock their rows in name order (ORDER BY name FOR UPDATE), and
// lease rows are always locked before bucket rows, so operations are atomic,
// all-or-nothing and deadlock-free. The token-bucket arithmetic is a
// line-by-line port of package bucket to SQL, exact over numeric for the
// products that need more than 64 bits; a differential test proves the port
// agrees with package bucket on random and extreme inputs.
//
// # Clock
//
// By default decisions use the server's clock_timestamp() (in milliseconds),
// read after the rows are locked, so the whole fleet shares one clock and
// the Now fields of requests are ignored (not even validated).
// WithCallerClock uses each request's Now instead; the conformance suite and
// the golden vectors need it. Either way every bucket computation first
// aligns the stored state with the decision time (bucket.Align) within
// WithMaxSkew.
//
// # Timeouts
//
// Every operation, Migrate included, is bounded by the caller's deadline,
// or, for a context without one, by WithTimeout (default DefaultTimeout),
// as the store contract says, and reports running out of time as
// store.ErrUnavailable: a hung server never blocks a caller. The timeout
// also bounds what no caller's context covers: the rollback that gives a
// connection back clean after a cancelled Migrate, and each connection of
// the background watch for freed slots (WatchFreed).
//
// # Schema
//
// Migrate creates or upgrades the schema; it is idempotent and safe to run
// from several processes at once. See docs/stores/postgres.md.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// DefaultSchema is the schema the store uses unless WithSchema says
// otherwise.
const DefaultSchema = "sluice"

// DefaultTimeout bounds every operation unless WithTimeout says otherwise.
// PostgreSQL itself puts no bound on a statement, so without one a hung
// server (or a network that drops packets silently) would block callers
// for as long as their contexts allow, possibly forever.
const DefaultTimeout = 2 * time.Second

// Store is the PostgreSQL store. It is safe for concurrent use.
type Store struct {
	pool        *pgxpool.Pool
	schema      string
	callerClock bool
	timeout     time.Duration
	maxSkew     time.Duration
	closed      atomic.Bool
	q           queries
	usage       usageParts // the usage partitions made sure of (usage.go)
}

// Option configures a Store.
type Option func(*Store)

// WithSchema sets the schema holding Sluice's tables and functions (default
// DefaultSchema), so that Sluice can live beside an application's tables.
func WithSchema(name string) Option { return func(s *Store) { s.schema = name } }

// WithCallerClock makes the store decide at each request's Now instead of
// the server's clock_timestamp().
func WithCallerClock() Option { return func(s *Store) { s.callerClock = true } }

// WithMaxSkew sets the largest disagreement between callers' clocks the
// store tolerates (default store.DefaultMaxSkew; 1 ms to 1 h), as
// bucket.Align defines it: a caller behind a bucket's refill timestamp by
// at most d decides at that timestamp; one further behind is refused
// admission until its clock is within d, and its other operations apply at
// the timestamp, which never moves backwards. It matters with
// WithCallerClock; with the server's clock it only absorbs a step back of
// that clock.
func WithMaxSkew(d time.Duration) Option { return func(s *Store) { s.maxSkew = d } }

// WithTimeout bounds every operation whose context carries no deadline,
// Migrate, MigrateReport, Version and Ping included, and covers waiting
// for a pooled connection, dialling and the statement itself (default
// DefaultTimeout); a deadline the caller set (sluice.Client sets one from
// Config.OpTimeout) bounds the operation instead, shorter or longer.
// Running out of time is reported as store.ErrUnavailable. d must be
// positive.
func WithTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// New returns a store over pool. The store does not own pool: Close leaves
// it open. New does not touch the database; run Migrate once (at deploy
// time, or at start-up) before using the store.
func New(pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: nil pool")
	}
	s := &Store{pool: pool, schema: DefaultSchema, timeout: DefaultTimeout, maxSkew: store.DefaultMaxSkew}
	for _, o := range opts {
		o(s)
	}
	if err := validSchema(s.schema); err != nil {
		return nil, err
	}
	if s.timeout <= 0 {
		return nil, &bucket.FieldError{Field: "pgstore.WithTimeout", Value: s.timeout.String(), Reason: "must be positive"}
	}
	if err := store.ValidateMaxSkew(s.maxSkew); err != nil {
		return nil, err
	}
	s.q = newQueries(pgx.Identifier{s.schema}.Sanitize())
	return s, nil
}

// Store implements the whole contract, its optional operations included.
var (
	_ store.Queuer = (*Store)(nil)
	_ store.Cooler = (*Store)(nil)
	_ store.Syncer = (*Store)(nil)
)

// Schema returns the schema the store uses.
func (s *Store) Schema() string { return s.schema }

// Close marks the store closed; later operations return store.ErrClosed.
// It does not close the pool. It is idempotent.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// skewMs is the maximum clock skew in milliseconds, as the SQL functions
// take it.
func (s *Store) skewMs() int64 { return s.maxSkew.Milliseconds() }

// Timeout returns the bound on each operation whose context carries no
// deadline (see WithTimeout).
func (s *Store) Timeout() time.Duration { return s.timeout }

// begin checks that the store is open and bounds a context without a
// deadline by the store's timeout (store.WithDefaultTimeout). pgx
// watches the context: when it is done, the connection's deadline is set
// and the call returns at once, whatever state the server is in; the
// connection is then closed and leaves the pool.
func (s *Store) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return ctx, func() {}, store.ErrClosed
	}
	ctx, cancel := store.WithDefaultTimeout(ctx, s.timeout)
	return ctx, cancel, nil
}

// Ping checks that the server answers (one "SELECT 1" through the pool),
// within the store's timeout: nil, or an error matching
// store.ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	var one int
	return fail("ping", s.pool.QueryRow(ctx, "SELECT 1").Scan(&one))
}

// now returns the decision time to pass to SQL: nil (NULL, the server
// clock) by default, the request time with WithCallerClock.
func (s *Store) now(t time.Time) *int64 {
	if !s.callerClock {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}

// fail maps a driver error: serialization failures and deadlocks are
// store.ErrContention, server errors about the statement itself are
// returned as they are, and everything else (connection refused or lost,
// timeouts, server shutting down) is store.ErrUnavailable.
func fail(op string, err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40001" || pe.Code == "40P01":
			return fmt.Errorf("%w: %s: %w", store.ErrContention, op, err)
		case len(pe.Code) == 5 && (pe.Code[:2] == "08" || pe.Code[:2] == "53" || pe.Code[:2] == "57" || pe.Code[:2] == "58") || pe.Code == "25006" || pe.Code == "55P03":
			// Connection exceptions, insufficient resources, operator
			// intervention (shutdown, cancel, statement timeout), system
			// errors, a server that takes only reads (a primary demoted
			// by a failover, still named by DNS), and a lock_timeout that
			// cancelled a wait for a row (the statement rolled back).
			return store.Unavailable(op, err)
		case pe.Code == "42883" || pe.Code == "42P01" || pe.Code == "42703" || pe.Code == "3F000":
			// Undefined function, table, column or schema: a configuration error.
			return fmt.Errorf("pgstore: %s: the schema lacks what this code needs (version %d): run Migrate or 'sluice postgres migrate': %w",
				op, SchemaVersion(), err)
		}
		return err
	}
	return store.Unavailable(op, err)
}

// schemaPattern is what WithSchema accepts: an unquoted-style identifier of
// at most 63 bytes (PostgreSQL's NAMEDATALEN-1).
var schemaPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// validSchema checks a schema name against schemaPattern. The name is
// spliced (quoted) into SQL text, including the function files' bodies,
// so nothing outside this plain alphabet is ever let through: no
// quotes, dollar signs, whitespace, comment markers or non-ASCII.
func validSchema(name string) error {
	if !schemaPattern.MatchString(name) {
		return &bucket.FieldError{Field: "pgstore.WithSchema", Value: name,
			Reason: "must be 1 to 63 ASCII letters, digits or underscores, not starting with a digit"}
	}
	return nil
}
