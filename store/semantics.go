package store

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ontopix/sluice/bucket"
)

// DefaultMaxSkew is the default for the largest disagreement between the
// clocks of a store's callers that the store tolerates (see bucket.Align):
// a caller behind a bucket's refill timestamp by at most this much decides
// at that timestamp; one further behind is refused admission (Acquire,
// Reserve) until its clock is within it, and its other operations apply
// at the timestamp. The refill timestamp never moves backwards.
const DefaultMaxSkew = time.Second

// MaxMaxSkew is the largest maximum skew a store accepts.
const MaxMaxSkew = time.Hour

// ValidateMaxSkew checks a store's maximum clock skew option.
func ValidateMaxSkew(d time.Duration) error {
	if d < time.Millisecond || d > MaxMaxSkew {
		return invalid("max_skew", d, "must be between 1ms and 1h")
	}
	return nil
}

// HeldAfter returns a lease's cost for one dimension, in tokens, after an
// adjustment of delta tokens that changed the balance by applied
// millitokens (bucket.Adjust's second result). A refund lowers the held
// cost by the whole refund; a charge raises it only by the whole tokens
// actually charged, so a charge that the debt floor clamped can never be
// refunded beyond what was taken.
func HeldAfter(held, delta, applied int64) int64 {
	if delta < 0 {
		return held + delta
	}
	return held + max(0, applied/bucket.Milli)
}

// CheckTypeChange rejects reconfiguring a bucket to or from a concurrent
// limit. A concurrent bucket's balance is its capacity minus the slots its
// lease records hold, which a requests or tokens bucket does not track, so
// the type can change only by deleting the bucket and creating it again
// (leases of the old bucket then restore nothing into the new one).
func CheckTypeChange(old, next Bucket) error {
	if old.Type == next.Type || (old.Type != bucket.Concurrent && next.Type != bucket.Concurrent) {
		return nil
	}
	return invalid("limit_type", next.Type.String(), fmt.Sprintf(
		"bucket %q is %s; a limit type cannot change to or from concurrent in place: delete the bucket and create it again",
		next.Name, old.Type))
}

// SameItems reports whether a lease record's items and an acquisition's
// items, with costs resolved against their buckets, name the same
// dimensions at the same costs, in any order. A store uses it to tell a
// retried acquisition (answered as the grant it was) from the reuse of a
// lease id for a different request (ErrLeaseInUse).
func SameItems(record, req []Item) bool {
	if len(record) != len(req) {
		return false
	}
	a, b := slices.Clone(record), slices.Clone(req)
	byDim := func(x, y Item) int { return strings.Compare(x.Dimension, y.Dimension) }
	slices.SortFunc(a, byDim)
	slices.SortFunc(b, byDim)
	return slices.Equal(a, b)
}
