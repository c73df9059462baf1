// Package contract holds what the portable layer does to every request
// before a store sees it: the checks of the request's own fields, with
// errors that name the field and the value, and the defaults. Package
// sluice's Client and the conformance suite in store/storetest both run
// drivers through Checked, so that a driver may assume a validated,
// defaulted request (see package store) and the suite's model computes the
// errors the Client returns.
package contract

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

func invalid(field string, v any, why string) error {
	return &bucket.FieldError{Field: field, Value: v, Reason: why}
}

// Name checks a dimension name: 1..store.MaxNameLen bytes of valid UTF-8,
// no control characters, no braces (they would break Redis Cluster hash
// tags), and not starting with store.LeasePrefix.
func Name(name string) error {
	const field = "dimension"
	switch {
	case name == "":
		return invalid(field, name, "must not be empty")
	case len(name) > store.MaxNameLen:
		return invalid(field, name[:32]+"…", fmt.Sprintf("is %d bytes; the limit is %d", len(name), store.MaxNameLen))
	case !utf8.ValidString(name):
		return invalid(field, name, "must be valid UTF-8")
	case strings.HasPrefix(name, store.LeasePrefix):
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

// Bucket checks a bucket's name and configuration.
func Bucket(b store.Bucket) error {
	if err := Name(b.Name); err != nil {
		return err
	}
	if err := b.Config.Validate(); err != nil {
		return fmt.Errorf("bucket %q: %w", b.Name, err)
	}
	return nil
}

// Now checks that a request's time is within the range the bucket math
// accepts: from the Unix epoch to 2^53 ms after it.
func Now(t time.Time) error {
	if ms := t.UnixMilli(); ms < 0 || ms > bucket.MaxTimeMs {
		return invalid("now", t, "must be between the Unix epoch and 2^53 ms after it")
	}
	return nil
}

// TTL checks a lease lifetime: 1 ms to store.MaxTTL.
func TTL(ttl time.Duration) error {
	if ttl < time.Millisecond || ttl > store.MaxTTL {
		return invalid("ttl", ttl, "must be between 1ms and 24h")
	}
	return nil
}

// grant checks what an acquisition and a reservation share: the time, the
// items' names and costs (no duplicates), the TTL, the caller and the
// lease id.
func grant(now time.Time, its []store.Item, ttl time.Duration, caller string, id store.LeaseID) error {
	if err := Now(now); err != nil {
		return err
	}
	for _, it := range its {
		if err := Name(it.Dimension); err != nil {
			return err
		}
	}
	if err := items(its); err != nil {
		return err
	}
	if err := TTL(ttl); err != nil {
		return err
	}
	if len(caller) > store.MaxCallerLen || !utf8.ValidString(caller) {
		return invalid("caller", caller, fmt.Sprintf("must be valid UTF-8 of at most %d bytes", store.MaxCallerLen))
	}
	if id.IsZero() {
		return invalid("lease_id", id.String(), "must be set (use NewLeaseID)")
	}
	return nil
}

// Acquire checks everything about req that does not need the buckets
// (time, names, costs, duplicates, TTL, caller, id, poll) and fills in the
// default poll interval.
func Acquire(req *store.AcquireRequest) error {
	if err := grant(req.Now, req.Items, req.TTL, req.Caller, req.ID); err != nil {
		return err
	}
	if req.Poll < 0 {
		return invalid("poll", req.Poll, "must not be negative")
	}
	if req.Poll == 0 {
		req.Poll = store.DefaultPoll
	}
	return Queue(req.Queue)
}

// items checks an acquisition's item count, costs and duplicates.
func items(its []store.Item) error {
	if len(its) == 0 {
		return invalid("items", 0, "an acquisition needs at least one dimension")
	}
	if len(its) > store.MaxItems {
		return invalid("items", len(its), fmt.Sprintf("at most %d dimensions per acquisition", store.MaxItems))
	}
	for i, it := range its {
		if it.Cost < 0 || it.Cost > bucket.MaxCapacity {
			return invalid("cost["+it.Dimension+"]", it.Cost, "must be between 1 and 10^12 tokens (0 means the bucket's cost per call)")
		}
		for _, prev := range its[:i] {
			if prev.Dimension == it.Dimension {
				return invalid("dimension", it.Dimension, "appears twice in one acquisition; add the costs instead")
			}
		}
	}
	return nil
}

// Release checks a ReleaseRequest.
func Release(req store.ReleaseRequest) error {
	if err := Now(req.Now); err != nil {
		return err
	}
	return leaseID(req.ID)
}

// Extend checks an ExtendRequest.
func Extend(req store.ExtendRequest) error {
	if err := Now(req.Now); err != nil {
		return err
	}
	if err := leaseID(req.ID); err != nil {
		return err
	}
	return TTL(req.TTL)
}

func leaseID(id store.LeaseID) error {
	if id.IsZero() {
		return invalid("lease_id", id.String(), "must be set")
	}
	return nil
}

// Adjust checks an AdjustRequest's own fields.
func Adjust(req store.AdjustRequest) error {
	if err := Now(req.Now); err != nil {
		return err
	}
	if err := Name(req.Dimension); err != nil {
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

// Penalize checks a PenalizeRequest's own fields.
func Penalize(req store.PenalizeRequest) error {
	if err := Now(req.Now); err != nil {
		return err
	}
	if err := Name(req.Dimension); err != nil {
		return err
	}
	if req.FactorMilli < 0 || req.FactorMilli > 1000 {
		return invalid("factor", float64(req.FactorMilli)/1000, "must be between 0 and 1")
	}
	return nil
}

// Cooldown checks a CooldownRequest.
func Cooldown(req store.CooldownRequest) error {
	if err := Now(req.Now); err != nil {
		return err
	}
	if err := Name(req.Dimension); err != nil {
		return err
	}
	if d := req.Until.Sub(req.Now); d < time.Millisecond || d > store.MaxCooldown {
		return invalid("until", req.Until.UTC().Format(time.RFC3339Nano), fmt.Sprintf("must be 1ms to %s after now (%s)", store.MaxCooldown, req.Now.UTC().Format(time.RFC3339Nano)))
	}
	return nil
}

// Sync checks a SyncRequest.
func Sync(req store.SyncRequest) error {
	if err := Now(req.Now); err != nil {
		return err
	}
	if err := Name(req.Dimension); err != nil {
		return err
	}
	if req.Remaining < 0 || req.Remaining > bucket.MaxCapacity {
		return invalid("remaining", req.Remaining, "must be between 0 and 10^12 tokens")
	}
	return nil
}

// Reconcile checks a ReconcileRequest and fills in the default limit.
func Reconcile(req *store.ReconcileRequest) error {
	if err := Now(req.Now); err != nil {
		return err
	}
	if req.Limit < 0 || req.Limit > MaxReconcileLimit {
		return invalid("limit", req.Limit, fmt.Sprintf("must be between 0 and %d (0 means %d)", MaxReconcileLimit, store.DefaultReconcileLimit))
	}
	if req.Limit == 0 {
		req.Limit = store.DefaultReconcileLimit
	}
	return nil
}

// MaxReconcileLimit is the largest reconcile batch.
const MaxReconcileLimit = 100_000

// Leases checks a LeaseQuery.
func Leases(q store.LeaseQuery) error {
	if err := Now(q.Now); err != nil {
		return err
	}
	if q.Limit < 0 {
		return invalid("limit", q.Limit, "must not be negative (0 means no bound)")
	}
	return nil
}

// Peek checks a PeekRequest.
func Peek(req store.PeekRequest) error {
	if err := Now(req.Now); err != nil {
		return err
	}
	if len(req.Dimensions) == 0 {
		return invalid("dimensions", 0, "name at least one dimension")
	}
	for _, d := range req.Dimensions {
		if err := Name(d); err != nil {
			return err
		}
	}
	return nil
}

// PutBucket checks a PutBucketRequest.
func PutBucket(req store.PutBucketRequest) error {
	if err := Now(req.Now); err != nil {
		return err
	}
	if req.IfMatch != nil {
		if req.IfAbsent {
			return invalid("if_match", *req.IfMatch, "cannot be combined with if_absent: a creation has no configuration to match")
		}
		if err := req.IfMatch.Validate(); err != nil {
			return fmt.Errorf("if_match: %w", err)
		}
	}
	return Bucket(req.Bucket)
}

// Queue checks an acquisition's waiter-queue ticket lifetime: 0 (no
// queue) or 1 ms to store.MaxQueueTTL.
func Queue(d time.Duration) error {
	if d != 0 && (d < time.Millisecond || d > store.MaxQueueTTL) {
		return invalid("queue", d, fmt.Sprintf("must be 0 (no queue) or between 1ms and %s", store.MaxQueueTTL))
	}
	return nil
}

// Reserve checks everything about req that does not need the buckets
// (time, names, costs, duplicates, TTL, caller, id, maximum wait).
func Reserve(req *store.ReserveRequest) error {
	if err := grant(req.Now, req.Items, req.TTL, req.Caller, req.ID); err != nil {
		return err
	}
	if req.MaxWait < 0 || req.MaxWait > store.MaxReserveWait || req.MaxWait%time.Millisecond != 0 {
		return invalid("max_wait", req.MaxWait, fmt.Sprintf("must be a whole number of milliseconds from 0 to %s", store.MaxReserveWait))
	}
	return nil
}

// Cancel checks a CancelRequest. A reservation without a record must
// name its items, at the costs it holds now (0 to 10^12 tokens: what
// adjustments left of the resolved costs), and its valid instant.
func Cancel(req store.CancelRequest) error {
	if err := Now(req.Now); err != nil {
		return err
	}
	if err := leaseID(req.ID); err != nil {
		return err
	}
	if req.Recorded {
		return nil
	}
	for _, it := range req.Items {
		if err := Name(it.Dimension); err != nil {
			return err
		}
	}
	if err := items(req.Items); err != nil {
		return err
	}
	if err := Now(req.ValidAt); err != nil {
		return invalid("valid_at", req.ValidAt, "must be the reservation's valid instant, between the Unix epoch and 2^53 ms after it")
	}
	return nil
}

// Dequeue checks a DequeueRequest.
func Dequeue(req store.DequeueRequest) error {
	if err := Now(req.Now); err != nil {
		return err
	}
	if err := leaseID(req.ID); err != nil {
		return err
	}
	if len(req.Dimensions) == 0 || len(req.Dimensions) > store.MaxItems {
		return invalid("dimensions", len(req.Dimensions), fmt.Sprintf("name 1 to %d dimensions", store.MaxItems))
	}
	for _, d := range req.Dimensions {
		if err := Name(d); err != nil {
			return err
		}
	}
	return nil
}
