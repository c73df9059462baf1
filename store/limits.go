package store

import (
	"fmt"
	"time"

	"github.com/ontopix/sluice/bucket"
)

// Limits on requests. The portable layer enforces them before a request
// reaches a store; a store may rely on them, e.g. to size buffers.
const (
	// MaxNameLen is the longest dimension name, in bytes.
	MaxNameLen = 200
	// MaxCallerLen is the longest caller name, in bytes.
	MaxCallerLen = 200
	// MaxItems is the most dimensions one acquisition may name.
	MaxItems = 16
	// MaxTTL is the longest lease lifetime.
	MaxTTL = 24 * time.Hour
	// MaxCooldown is the longest cooldown: a vendor's retry-after for a
	// rate limit is seconds to minutes; a longer wait is a quota, not a
	// rate.
	MaxCooldown = 24 * time.Hour
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

// ResolveCost returns an item's cost in tokens against b: the bucket's
// cost per call when the item names none, or a *CostError when it exceeds
// the capacity.
func (b *Bucket) ResolveCost(it Item) (int64, error) {
	cost := it.Cost
	if cost == 0 {
		cost = b.Config.Cost()
	}
	if cost > b.Capacity {
		return 0, &CostError{Dimension: b.Name, Cost: cost, Capacity: b.Capacity}
	}
	return cost, nil
}

// CheckAdjustable rejects adjusting a concurrent bucket: its cost is a
// number of slots, not usage to settle.
func (b *Bucket) CheckAdjustable() error {
	if b.Type == bucket.Concurrent {
		return invalid("dimension", b.Name, "is a concurrent dimension; its cost cannot be adjusted (acquire the slots you need)")
	}
	return nil
}

// CheckPenalizable rejects penalizing a concurrent bucket.
func (b *Bucket) CheckPenalizable() error {
	if b.Type == bucket.Concurrent {
		return invalid("dimension", b.Name, "is a concurrent dimension; penalize applies to requests and tokens limits")
	}
	return nil
}

// CheckCoolable rejects a cooldown or a sync on a concurrent bucket: a
// vendor's concurrency limit is answered by the queue, not by a cooldown.
func (b *Bucket) CheckCoolable(op string) error {
	if b.Type == bucket.Concurrent {
		return invalid("dimension", b.Name, "is a concurrent dimension; "+op+" applies to requests and tokens limits")
	}
	return nil
}

// AdjustHeld checks a refund against what a lease holds on dimension and
// returns the lease's new cost. A refund larger than the held cost is an
// error.
func AdjustHeld(dimension string, held, delta int64) (int64, error) {
	if delta < 0 && -delta > held {
		return 0, invalid("delta", delta, fmt.Sprintf("refunds %d tokens but the lease holds %d on %q", -delta, held, dimension))
	}
	return held + delta, nil
}
