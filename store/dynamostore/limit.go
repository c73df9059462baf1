package dynamostore

import (
	"errors"
	"fmt"

	"github.com/ontopix/sluice/bucket"
)

// DefaultMaxLeasesPerBucket bounds the live recorded leases one bucket row
// lists in its holders map. A DynamoDB item holds at most 400 KB
// (409,600 bytes); an entry takes about 55 bytes (a 36-byte lease id, the
// expiry and the cost, and the map's overhead), so a row fills up at about
// 7,400 entries. The default keeps a margin for the row's other
// attributes and for expired entries the reconciler has not yet removed.
const DefaultMaxLeasesPerBucket = 6000

// MaxLeasesPerBucket is the largest value WithMaxLeasesPerBucket accepts.
// New also refuses a WithMaxLeasesPerBucket and WithMaxWaitersPerBucket
// pair whose full row could exceed 400 KB: 7000 leases leave room for at
// most 50 waiters.
const MaxLeasesPerBucket = 7000

// ErrTooManyLeases is matched by a *LeaseLimitError: an acquisition that
// would record a lease on a bucket whose row already lists the most live
// recorded leases it can hold. It is neither an outage nor contention:
// the client returns it to the caller.
var ErrTooManyLeases = errors.New("dynamostore: too many recorded leases on one bucket")

// LeaseLimitError reports a bucket whose holders map is full.
type LeaseLimitError struct {
	// Dimension is the bucket's name.
	Dimension string
	// Limit is the store's limit (WithMaxLeasesPerBucket).
	Limit int
	// ItemFull reports that DynamoDB refused the write because the row
	// would exceed its 400 KB item size, before the row listed Limit
	// leases.
	ItemFull bool
	err      error
}

// Error implements error.
func (e *LeaseLimitError) Error() string {
	if e.ItemFull {
		return fmt.Sprintf("dynamostore: bucket %q cannot record one more lease: its row would exceed DynamoDB's 400 KB item size before listing %d recorded leases (the limit per bucket); release leases, reconcile expired ones, or spread the load over more buckets: %v", e.Dimension, e.Limit, e.err)
	}
	return fmt.Sprintf("dynamostore: bucket %q already lists %d recorded leases, the limit per bucket (a DynamoDB item holds at most 400 KB); release leases, reconcile expired ones, or spread the load over more buckets", e.Dimension, e.Limit)
}

// Is makes errors.Is(err, ErrTooManyLeases) true.
func (e *LeaseLimitError) Is(target error) bool { return target == ErrTooManyLeases }

// Unwrap returns DynamoDB's error when ItemFull is set.
func (e *LeaseLimitError) Unwrap() error { return e.err }

// WithMaxLeasesPerBucket sets how many recorded leases one bucket row may
// list (see DefaultMaxLeasesPerBucket); an acquisition beyond it fails
// with a *LeaseLimitError. 1 to MaxLeasesPerBucket.
func WithMaxLeasesPerBucket(n int) Option { return func(s *Store) { s.maxLeases = n } }

func validateMaxLeases(n int) error {
	if n < 1 || n > MaxLeasesPerBucket {
		return &bucket.FieldError{Field: "max_leases_per_bucket", Value: fmt.Sprint(n), Reason: fmt.Sprintf("must be between 1 and %d", MaxLeasesPerBucket)}
	}
	return nil
}

// full returns the error for the first row of bis on which a grant of d
// would list one lease more than the limit, or nil.
func (s *Store) full(bis []*bucketItem, d *decision) error {
	if !d.hold {
		return nil
	}
	for _, bi := range bis {
		if len(bi.holders) >= s.maxLeases {
			return &LeaseLimitError{Dimension: bi.b.Name, Limit: s.maxLeases}
		}
	}
	return nil
}
