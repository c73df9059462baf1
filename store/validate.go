package store

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ontopix/sluice/bucket"
)

// Limits on requests, enforced by every store through the helpers below.
const (
	// MaxNameLen is the longest dimension name, in bytes.
	MaxNameLen = 200
	// MaxCallerLen is the longest caller name, in bytes.
	MaxCallerLen = 200
	// MaxItems is the most dimensions one acquisition may name.
	MaxItems = 16
	// MaxTTL is the longest lease lifetime.
	MaxTTL = 24 * time.Hour
	// DefaultPoll is the default cap on a concurrent RETRY_IN hint.
	DefaultPoll = time.Second
	// DefaultReconcileLimit is the default reconcile batch size.
	DefaultReconcileLimit = 1000
	// LeasePrefix starts every lease key in the stores; no dimension may.
	LeasePrefix = "lease#"
)

func invalid(field string, v any, why string) error {
	return &bucket.FieldError{Field: field, Value: v, Reason: why}
}

// ValidateName checks a dimension name: 1..MaxNameLen bytes of valid UTF-8,
// no control characters, no braces (they would break Redis Cluster hash
// tags), and not starting with LeasePrefix.
func ValidateName(name string) error {
	const field = "dimension"
	switch {
	case name == "":
		return invalid(field, name, "must not be empty")
	case len(name) > MaxNameLen:
		return invalid(field, name[:32]+"…", fmt.Sprintf("is %d bytes; the limit is %d", len(name), MaxNameLen))
	case !utf8.ValidString(name):
		return invalid(field, name, "must be valid UTF-8")
	case strings.HasPrefix(name, LeasePrefix):
		return invalid(field, name, "must not start with \"lease#\" (reserved for lease records)")
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

// UnknownDimension returns the error for a name with no bucket: a
// validation error when the name is invalid, else a *ConfigurationError.
func UnknownDimension(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return &ConfigurationError{Dimension: name}
}

// ValidateBucket checks a bucket's name and configuration.
func ValidateBucket(b Bucket) error {
	if err := ValidateName(b.Name); err != nil {
		return err
	}
	if err := b.Config.Validate(); err != nil {
		return fmt.Errorf("bucket %q: %w", b.Name, err)
	}
	return nil
}

// NowMs converts t to Unix milliseconds, checking that it is within the
// range the math accepts.
func NowMs(t time.Time) (int64, error) {
	ms := t.UnixMilli()
	if ms < 0 || ms > bucket.MaxTimeMs {
		return 0, invalid("now", t, "must be between the Unix epoch and 2^53 ms after it")
	}
	return ms, nil
}

// ValidateAcquire checks everything about req that does not need the
// buckets: names, costs, duplicates, TTL, caller and id.
func ValidateAcquire(req *AcquireRequest) error {
	for _, it := range req.Items {
		if err := ValidateName(it.Dimension); err != nil {
			return err
		}
	}
	return ValidateAcquireShape(req)
}

// ValidateAcquireShape is ValidateAcquire without the name checks, for a
// store that validates a name only when it finds no bucket by that name
// (every stored bucket's name was validated by PutBucket).
func ValidateAcquireShape(req *AcquireRequest) error {
	if len(req.Items) == 0 {
		return invalid("items", 0, "an acquisition needs at least one dimension")
	}
	if len(req.Items) > MaxItems {
		return invalid("items", len(req.Items), fmt.Sprintf("at most %d dimensions per acquisition", MaxItems))
	}
	for i, it := range req.Items {
		if it.Cost < 0 || it.Cost > bucket.MaxCapacity {
			return invalid("cost["+it.Dimension+"]", it.Cost, "must be between 1 and 10^12 tokens (0 means the bucket's cost per call)")
		}
		for _, prev := range req.Items[:i] {
			if prev.Dimension == it.Dimension {
				return invalid("dimension", it.Dimension, "appears twice in one acquisition; add the costs instead")
			}
		}
	}
	if req.TTL < time.Millisecond || req.TTL > MaxTTL {
		return invalid("ttl", req.TTL, "must be between 1ms and 24h")
	}
	if len(req.Caller) > MaxCallerLen || !utf8.ValidString(req.Caller) {
		return invalid("caller", req.Caller, fmt.Sprintf("must be valid UTF-8 of at most %d bytes", MaxCallerLen))
	}
	if req.ID.IsZero() {
		return invalid("lease_id", req.ID.String(), "must be set (use NewLeaseID)")
	}
	if req.Poll < 0 {
		return invalid("poll", req.Poll, "must not be negative")
	}
	return nil
}

// ResolveCost returns an item's cost in tokens against its bucket: the
// bucket's cost per call when the item names none, or a *CostError when it
// exceeds the capacity.
func ResolveCost(b *Bucket, it Item) (int64, error) {
	cost := it.Cost
	if cost == 0 {
		cost = b.Config.Cost()
	}
	if cost > b.Capacity {
		return 0, &CostError{Dimension: b.Name, Cost: cost, Capacity: b.Capacity}
	}
	return cost, nil
}

// ValidateAdjust checks an AdjustRequest's own fields.
func ValidateAdjust(req AdjustRequest) error {
	if err := ValidateName(req.Dimension); err != nil {
		return err
	}
	if req.Delta == 0 || req.Delta > bucket.MaxCapacity || req.Delta < -bucket.MaxCapacity {
		return invalid("delta", req.Delta, "must be non-zero and within ±10^12 tokens")
	}
	if !req.Recorded && (req.Held < 0 || req.Held > bucket.MaxCapacity) {
		return invalid("held", req.Held, "must be between 0 and 10^12 tokens")
	}
	return nil
}

// AdjustHeld validates a refund against what the lease holds and returns the
// lease's new cost. A refund larger than the held cost is an error.
func AdjustHeld(dimension string, held, delta int64) (int64, error) {
	if delta < 0 && -delta > held {
		return 0, invalid("delta", delta, fmt.Sprintf("refunds %d tokens but the lease holds %d on %q", -delta, held, dimension))
	}
	return held + delta, nil
}

// CheckAdjustable rejects adjusting a concurrent dimension.
func CheckAdjustable(b *Bucket) error {
	if b.Type == bucket.Concurrent {
		return invalid("dimension", b.Name, "is a concurrent dimension; its cost cannot be adjusted (acquire the slots you need)")
	}
	return nil
}

// ValidateTTL checks a lease lifetime.
func ValidateTTL(ttl time.Duration) error {
	if ttl < time.Millisecond || ttl > MaxTTL {
		return invalid("ttl", ttl, "must be between 1ms and 24h")
	}
	return nil
}

// ValidatePenalize checks a PenalizeRequest's own fields.
func ValidatePenalize(req PenalizeRequest) error {
	if err := ValidateName(req.Dimension); err != nil {
		return err
	}
	if req.FactorMilli < 0 || req.FactorMilli > 1000 {
		return invalid("factor", float64(req.FactorMilli)/1000, "must be between 0 and 1")
	}
	return nil
}

// CheckPenalizable rejects penalizing a concurrent dimension.
func CheckPenalizable(b *Bucket) error {
	if b.Type == bucket.Concurrent {
		return invalid("dimension", b.Name, "is a concurrent dimension; penalize applies to requests and tokens limits")
	}
	return nil
}
