package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// UsageRow is one writer's running totals for one (dimension, caller) over
// one period. Writers put absolute totals, not increments, so a resent or
// repeated put is harmless, and two writers never meet on one row (their
// Writer differs). Readers sum rows over writers.
//
// A row is identified by (Dimension, Caller, Period, Start, Writer); a put
// replaces the row of that identity whole, unless the stored row was
// Updated later than the put's: a writer's put that arrives after its own
// later put (a request stalled on one connection while the next flush
// went through another, a resend after a timeout) is ignored, so that a
// row never goes back to older totals.
type UsageRow struct {
	// Dimension is the bucket's name, e.g. "openai#rpm". Required; the
	// rules of a bucket name apply (see ValidateUsage).
	Dimension string
	// Caller names who acquired; "" (no caller named) is allowed. At most
	// MaxCallerLen bytes of UTF-8.
	Caller string
	// Period is the row's length: time.Minute or time.Hour.
	Period time.Duration
	// Start is the row's first instant, a multiple of Period since the Unix
	// epoch (and so in UTC). Stores keep it to the millisecond.
	Start time.Time
	// Writer identifies the process that wrote the row; it is unique per
	// process lifetime (a UUID). Required, at most MaxWriterLen bytes of
	// UTF-8.
	Writer string
	// Counters are named totals. The writer defines the names (non-empty,
	// at most MaxCounterNameLen bytes of UTF-8); a store keeps them
	// opaquely. Nil and empty are the same: a row with no counters.
	Counters map[string]int64
	// Updated is when the writer last put the row; it orders one writer's
	// puts of a row, and a writer must never put a row with an earlier
	// Updated than it put before (history.Recorder keeps it increasing
	// even when the wall clock is set back). Required. Stores keep it to
	// the millisecond and compare it at that precision.
	Updated time.Time
}

// UsageQuery selects the rows of one dimension and period.
type UsageQuery struct {
	// Dimension is the bucket's name. Required.
	Dimension string
	// Period is time.Minute or time.Hour.
	Period time.Duration
	// From and To bound the rows' Start: From <= Start < To. Both lie
	// between the Unix epoch and year 9999 (a zero From is refused), and
	// From must not be after To; equal bounds select nothing.
	From, To time.Time
}

// UsageRetention is how long usage rows are kept at least, counted from the
// end of each row's period (Start + Period). A zero field means its default
// (DefaultUsageRetention); a negative one is invalid.
type UsageRetention struct{ Minute, Hour time.Duration }

// DefaultUsageRetention keeps minute rows for 48 hours and hour rows for 90
// days.
var DefaultUsageRetention = UsageRetention{Minute: 48 * time.Hour, Hour: 90 * 24 * time.Hour}

// Limits on usage rows.
const (
	// MaxWriterLen is the longest UsageRow.Writer, in bytes.
	MaxWriterLen = 200
	// MaxCounterNameLen is the longest counter name, in bytes.
	MaxCounterNameLen = 100
	// MaxUsageCounters is the most counters one row may carry.
	MaxUsageCounters = 64
)

// Usager is the optional capability of a store that keeps usage history
// (see package history). A store without it keeps none; the caller shows
// only what its own process saw. Every store in this module implements it
// (remotestore through the store behind its service, answering with an
// error matching errors.ErrUnsupported when that store keeps none).
// Implementations are safe for concurrent use.
type Usager interface {
	// PutUsage upserts rows, replacing each (Dimension, Caller, Period,
	// Start, Writer) row's Counters and Updated whole, so that a put sent
	// twice (a retry, a driver's resend) leaves what one put leaves; a row
	// whose stored Updated is after the put's is left as it is (the put
	// is late), and of two rows of one identity in one put the later
	// Updated wins (the last one when they are equal). All
	// rows of one call have the same Dimension. retention is how long rows
	// of each period must be kept at least; the store expires them by its
	// own means afterwards (Redis key expiry, a DynamoDB TTL attribute,
	// PostgreSQL partitions dropped whole; never a bulk DELETE), and rows
	// already past their retention are neither stored nor listed. Bad input
	// (see ValidateUsage) fails with an error matching ErrInvalid before
	// anything is written.
	PutUsage(ctx context.Context, rows []UsageRow, retention UsageRetention) error
	// ListUsage returns the rows of one dimension and period whose Start
	// is in [From, To), every writer's and caller's row separately, in no
	// particular order; rows past their retention are left out. The
	// returned times are in UTC. Bad input (see ValidateUsageQuery) fails
	// with an error matching ErrInvalid.
	ListUsage(ctx context.Context, q UsageQuery) ([]UsageRow, error)
}

// WithDefaults returns r with each zero field set to its default
// (DefaultUsageRetention).
func (r UsageRetention) WithDefaults() UsageRetention {
	if r.Minute == 0 {
		r.Minute = DefaultUsageRetention.Minute
	}
	if r.Hour == 0 {
		r.Hour = DefaultUsageRetention.Hour
	}
	return r
}

// For returns the retention of rows of period p (time.Minute or
// time.Hour), its default when zero.
func (r UsageRetention) For(p time.Duration) time.Duration {
	r = r.WithDefaults()
	if p == time.Hour {
		return r.Hour
	}
	return r.Minute
}

// Expires returns the instant after which a store may drop the row under
// retention r: Start + Period + r.For(Period).
func (row UsageRow) Expires(r UsageRetention) time.Time {
	return row.Start.Add(row.Period + r.For(row.Period))
}

// ValidateUsage checks a PutUsage call: a retention with no negative field,
// and rows of one valid dimension, each with a period of time.Minute or
// time.Hour, a Start aligned to it and not before the Unix epoch, a valid
// caller, a non-empty writer, valid counter names and an Updated time.
// Its error is a *bucket.FieldError (it matches ErrInvalid) naming the
// field and the value, prefixed with the row's index when a row is at
// fault. Every store calls it before it writes anything.
func ValidateUsage(rows []UsageRow, retention UsageRetention) error {
	if retention.Minute < 0 {
		return invalid("retention.minute", retention.Minute, "must not be negative (zero means 48h)")
	}
	if retention.Hour < 0 {
		return invalid("retention.hour", retention.Hour, "must not be negative (zero means 2160h, 90 days)")
	}
	for i, r := range rows {
		if err := validateRow(r); err != nil {
			return fmt.Errorf("usage row %d: %w", i, err)
		}
		if r.Dimension != rows[0].Dimension {
			return fmt.Errorf("usage row %d: %w", i, invalid("dimension", r.Dimension,
				fmt.Sprintf("every row of one put must have the dimension of the first, %q", rows[0].Dimension)))
		}
	}
	return nil
}

func validateRow(r UsageRow) error {
	if err := usageName(r.Dimension); err != nil {
		return err
	}
	if len(r.Caller) > MaxCallerLen || !utf8.ValidString(r.Caller) {
		return invalid("caller", r.Caller, fmt.Sprintf("must be valid UTF-8 of at most %d bytes", MaxCallerLen))
	}
	if err := usagePeriod(r.Period); err != nil {
		return err
	}
	if err := usageTime("start", r.Start); err != nil {
		return err
	}
	if !r.Start.Truncate(r.Period).Equal(r.Start) {
		return invalid("start", r.Start.UTC().Format(time.RFC3339Nano), fmt.Sprintf("must be a multiple of the period (%s) since the Unix epoch", r.Period))
	}
	if r.Writer == "" {
		return invalid("writer", r.Writer, "must not be empty (a unique id per process)")
	}
	if len(r.Writer) > MaxWriterLen || !utf8.ValidString(r.Writer) {
		return invalid("writer", r.Writer, fmt.Sprintf("must be valid UTF-8 of at most %d bytes", MaxWriterLen))
	}
	if len(r.Counters) > MaxUsageCounters {
		return invalid("counters", len(r.Counters), fmt.Sprintf("at most %d counters per row", MaxUsageCounters))
	}
	for name := range r.Counters {
		if name == "" || len(name) > MaxCounterNameLen || !utf8.ValidString(name) {
			return invalid("counter name", name, fmt.Sprintf("must be non-empty valid UTF-8 of at most %d bytes", MaxCounterNameLen))
		}
	}
	if r.Updated.IsZero() {
		return invalid("updated", "0001-01-01T00:00:00Z", "must be set: it orders a writer's puts of a row")
	}
	return usageTime("updated", r.Updated)
}

// ValidateUsageQuery checks a ListUsage query: a valid dimension, a period
// of time.Minute or time.Hour, From and To between the Unix epoch and year
// 9999, and From not after To. Its error is a
// *bucket.FieldError (it matches ErrInvalid) naming the field and value.
func ValidateUsageQuery(q UsageQuery) error {
	if err := usageName(q.Dimension); err != nil {
		return err
	}
	if err := usagePeriod(q.Period); err != nil {
		return err
	}
	if err := usageTime("from", q.From); err != nil {
		return err
	}
	if err := usageTime("to", q.To); err != nil {
		return err
	}
	if q.To.Before(q.From) {
		return invalid("to", q.To.UTC().Format(time.RFC3339Nano), fmt.Sprintf("must not be before from (%s)", q.From.UTC().Format(time.RFC3339Nano)))
	}
	return nil
}

func usagePeriod(p time.Duration) error {
	if p != time.Minute && p != time.Hour {
		return invalid("period", p, "must be 1m0s or 1h0m0s")
	}
	return nil
}

// usageTime checks that t is between the Unix epoch and year 9999, which
// every store can keep to the millisecond.
func usageTime(field string, t time.Time) error {
	if ms := t.UnixMilli(); ms < 0 || t.Year() > 9999 {
		return invalid(field, t.UTC().Format(time.RFC3339Nano), "must be between the Unix epoch and year 9999")
	}
	return nil
}

// usageName checks a dimension name as the portable layer checks a
// bucket's name.
func usageName(name string) error {
	const field = "dimension"
	switch {
	case name == "":
		return invalid(field, name, "must not be empty")
	case len(name) > MaxNameLen:
		return invalid(field, name[:32]+"…", fmt.Sprintf("is %d bytes; the limit is %d", len(name), MaxNameLen))
	case !utf8.ValidString(name):
		return invalid(field, name, "must be valid UTF-8")
	case strings.HasPrefix(name, LeasePrefix):
		return invalid(field, name, `must not start with "lease#" (reserved for lease records)`)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return invalid(field, name, "must not contain control characters")
		}
		if r == '{' || r == '}' {
			return invalid(field, name, "must not contain braces (reserved for Redis Cluster hash tags)")
		}
	}
	return nil
}

// UsageInRange reports whether row is selected by q's time bounds
// (From <= Start < To).
func UsageInRange(q UsageQuery, start time.Time) bool {
	return !start.Before(q.From) && start.Before(q.To)
}
