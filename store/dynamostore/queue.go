package dynamostore

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Waiter queues.
//
// A concurrent bucket's waiter queue is the map attribute waiters on its
// row: lease uuid → {"a": the decision time at which the ticket was first
// taken, "e": its expiry, both Unix ms, "c": the waiter's cost in tokens,
// absent in tickets written before costs were kept, which count as 1}. A
// request is granted when the balance covers its cost plus the costs of
// the live tickets of others ahead of it (see store.AcquireRequest.Queue). Keeping the queue on the row is
// what makes a grant atomic with its check of the head: an acquisition
// decides on the row as read (slots and tickets) and writes it conditioned
// on the version, which every write of the row bumps (a ticket taken, a
// grant, a release, a Dequeue), so a ticket that slips in ahead in between
// fails the condition and the acquisition decides again. A renewal of a
// live ticket alone leaves the version alone and counts itself in the
// row's renewals instead, on which a decision that found a ticket dead is
// conditioned (see renew.go). Dead tickets
// (expired) are ignored, and removed, at most maxPurge at a time, by the
// next acquisition or Dequeue that looks at the queue: a grant or a ticket
// taken removes them in its own write, and a denial that takes no ticket
// and a Dequeue write the removal, so that a caller whose clock is behind
// never sees a ticket that another found dead (the memory store's
// semantics). The
// map is bounded (WithMaxWaitersPerBucket), since a DynamoDB item holds at
// most 400 KB.

// DefaultMaxWaitersPerBucket bounds the tickets one concurrent bucket row
// lists in its waiters map. An entry takes about 65 bytes in the worst case
// (a 36-byte lease id, two Unix-ms numbers, its cost and the map's
// overhead): 900 entries leave the row room for DefaultMaxLeasesPerBucket
// holders within DynamoDB's 400 KB item (New checks the pair).
const DefaultMaxWaitersPerBucket = 900

// MaxWaitersPerBucket is the largest value WithMaxWaitersPerBucket
// accepts.
const MaxWaitersPerBucket = 2000

// maxPurge bounds the dead tickets one write removes, which keeps the
// update expression under DynamoDB's 4 KB (about 10 bytes per ticket).
const maxPurge = 200

// ErrTooManyWaiters is matched by a *WaiterLimitError: a queued
// acquisition that would take a ticket on a bucket whose waiter queue is
// full. It is neither an outage nor contention: the client returns it to
// the caller.
var ErrTooManyWaiters = errors.New("dynamostore: too many waiters on one bucket")

// WaiterLimitError reports a concurrent bucket whose waiter queue is full.
type WaiterLimitError struct {
	// Dimension is the bucket's name.
	Dimension string
	// Limit is the store's limit (WithMaxWaitersPerBucket).
	Limit int
	// ItemFull reports that DynamoDB refused the ticket because the row
	// would exceed its 400 KB item size, before the queue held Limit
	// waiters.
	ItemFull bool
	err      error
}

// Error implements error.
func (e *WaiterLimitError) Error() string {
	if e.ItemFull {
		return fmt.Sprintf("dynamostore: bucket %q cannot take one more waiter: its row would exceed DynamoDB's 400 KB item size before its queue held %d waiters (the limit per bucket); retry without queueing, or raise the bucket's capacity: %v", e.Dimension, e.Limit, e.err)
	}
	return fmt.Sprintf("dynamostore: bucket %q already has %d waiters in its queue, the limit per bucket (a DynamoDB item holds at most 400 KB); retry without queueing, or raise the bucket's capacity", e.Dimension, e.Limit)
}

// Is makes errors.Is(err, ErrTooManyWaiters) true.
func (e *WaiterLimitError) Is(target error) bool { return target == ErrTooManyWaiters }

// Unwrap returns DynamoDB's error when ItemFull is set.
func (e *WaiterLimitError) Unwrap() error { return e.err }

// WithMaxWaitersPerBucket sets how many waiter tickets one concurrent
// bucket row may list (see DefaultMaxWaitersPerBucket); a queued
// acquisition that would take one more fails with a *WaiterLimitError.
// 1 to MaxWaitersPerBucket.
func WithMaxWaitersPerBucket(n int) Option { return func(s *Store) { s.maxWaiters = n } }

func validateMaxWaiters(n int) error {
	if n < 1 || n > MaxWaitersPerBucket {
		return &bucket.FieldError{Field: "max_waiters_per_bucket", Value: fmt.Sprint(n), Reason: fmt.Sprintf("must be between 1 and %d", MaxWaitersPerBucket)}
	}
	return nil
}

// ticketValue encodes a ticket for the waiters map.
func ticketValue(t store.Ticket) types.AttributeValue {
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		ticketAt: numInt(t.At), ticketExp: numInt(t.Expires), ticketCst: numInt(max(t.Cost, 1))}}
}

// decodeWaiters reads a waiters map; entries that are not tickets are
// skipped. It never returns nil.
func decodeWaiters(m map[string]types.AttributeValue) map[string]store.Ticket {
	out := make(map[string]store.Ticket, len(m))
	for uuid, v := range m {
		x, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			continue
		}
		id, err := store.ParseLeaseID(uuid)
		if err != nil {
			continue
		}
		a, aok := getN(x.Value, ticketAt)
		e, eok := getN(x.Value, ticketExp)
		if !aok || !eok {
			continue
		}
		t := store.Ticket{ID: id, Cost: 1}
		var err1, err2, err3 error
		t.At, err1 = strconv.ParseInt(a, 10, 64)
		t.Expires, err2 = strconv.ParseInt(e, 10, 64)
		if c, ok := getN(x.Value, ticketCst); ok {
			t.Cost, err3 = strconv.ParseInt(c, 10, 64)
		}
		if err1 == nil && err2 == nil && err3 == nil {
			out[uuid] = t
		}
	}
	return out
}

// live counts bi's tickets alive at now.
func (bi *bucketItem) live(now int64) int {
	n := 0
	for _, t := range bi.waiters {
		if t.Expires > now {
			n++
		}
	}
	return n
}

// queuePlace returns the At of id's earliest live ticket in the rows'
// queues, else now: the request's place in line.
func queuePlace(bis []*bucketItem, id store.LeaseID, now int64) int64 {
	at, found, uuid := now, false, id.String()
	for _, bi := range bis {
		if t, ok := bi.waiters[uuid]; ok && t.Expires > now && (!found || t.At < at) {
			at, found = t.At, true
		}
	}
	return at
}

// queueAhead fills ahead and aheadCost with, per row, the number and the
// total cost of the live tickets of others ahead of id's place (see
// store.AcquireRequest.Queue).
func queueAhead(bis []*bucketItem, id store.LeaseID, now int64, ahead []int, aheadCost []int64) {
	clear(ahead)
	clear(aheadCost)
	me := store.Ticket{ID: id, At: queuePlace(bis, id, now)}
	for i, bi := range bis {
		for _, t := range bi.waiters {
			if t.ID != id && t.Expires > now && t.Before(me) {
				ahead[i]++
				aheadCost[i] += t.Cost
			}
		}
	}
}

// queueEdit is what one write does to a row's waiters map.
type queueEdit struct {
	remove []string // uuids whose tickets are removed
	put    string   // uuid of the ticket written, "" for none
	ticket store.Ticket
	// dead reports that the decision found tickets of others dead: the
	// write is conditioned on no ticket having been renewed in place since
	// the row was read (see renewInPlace).
	dead bool
}

func (q *queueEdit) empty() bool { return q == nil || len(q.remove) == 0 && q.put == "" }

// purge appends to q.remove up to maxPurge dead tickets of bi at now, in a
// fixed order, skipping keep.
func (q *queueEdit) purge(bi *bucketItem, now int64, keep string) {
	var dead []string
	for uuid, t := range bi.waiters {
		if t.Expires <= now && uuid != keep && !slices.Contains(q.remove, uuid) {
			dead = append(dead, uuid)
		}
	}
	q.dead = q.dead || len(dead) > 0
	slices.Sort(dead)
	q.remove = append(q.remove, dead[:min(len(dead), maxPurge)]...)
}

// grantEdit is the edit of a grant to id on bi: id's ticket goes, and dead
// ones with it; nil when there is nothing to change.
func grantEdit(bi *bucketItem, id store.LeaseID, now int64) *queueEdit {
	if len(bi.waiters) == 0 {
		return nil
	}
	q := &queueEdit{}
	if _, ok := bi.waiters[id.String()]; ok {
		q.remove = append(q.remove, id.String())
	}
	q.purge(bi, now, "")
	if q.empty() {
		return nil
	}
	return q
}

// purgeEdit is the edit that removes bi's dead tickets at now, as every
// acquisition and dequeue that looks at a queue does (see package
// memstore); nil when there are none.
func purgeEdit(bi *bucketItem, now int64) *queueEdit {
	q := &queueEdit{}
	q.purge(bi, now, "")
	if q.empty() {
		return nil
	}
	return q
}

// ticketEdit is the edit of a denial that queues id, of cost, on bi at
// place until expires: a live ticket of id's keeps its At; dead tickets
// go. It fails with a *WaiterLimitError when the queue is full.
func ticketEdit(bi *bucketItem, id store.LeaseID, cost, now, place, expires int64, limit int) (*queueEdit, error) {
	uuid := id.String()
	q := &queueEdit{put: uuid, ticket: store.Ticket{ID: id, At: place, Expires: expires, Cost: cost}}
	old, had := bi.waiters[uuid]
	if had && old.Expires > now {
		q.ticket.At = old.At
	}
	q.purge(bi, now, uuid)
	if !had && len(bi.waiters)-len(q.remove) >= limit {
		return nil, &WaiterLimitError{Dimension: bi.b.Name, Limit: limit}
	}
	return q, nil
}

// apply returns bi's waiters after q (a new map; bi's is left alone).
func (q *queueEdit) apply(w map[string]store.Ticket) map[string]store.Ticket {
	if q.empty() {
		return w
	}
	out := make(map[string]store.Ticket, len(w)+1)
	for k, t := range w {
		if !slices.Contains(q.remove, k) {
			out[k] = t
		}
	}
	if q.put != "" {
		out[q.put] = q.ticket
	}
	return out
}

// clauses adds q's SET and REMOVE clauses to an update of bi's row.
func (q *queueEdit) clauses(bi *bucketItem, names map[string]string, vals map[string]types.AttributeValue, set, rem []string) ([]string, []string) {
	if q.empty() {
		return set, rem
	}
	names["#w"] = attrWaiters
	if q.put != "" {
		if bi.waiters == nil {
			vals[":wm"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{q.put: ticketValue(q.ticket)}}
			set = append(set, "#w = :wm")
		} else {
			names["#wp"], vals[":wt"] = q.put, ticketValue(q.ticket)
			set = append(set, "#w.#wp = :wt")
		}
	}
	for i, uuid := range q.remove {
		k := "#wr" + strconv.Itoa(i)
		names[k] = uuid
		rem = append(rem, "#w."+k)
	}
	return set, rem
}

// renewedCond returns the condition that no ticket of bi was renewed in
// place since it was read, for a write whose decision found tickets dead
// (q.dead); "" otherwise.
func (q *queueEdit) renewedCond(bi *bucketItem, names map[string]string, vals map[string]types.AttributeValue) string {
	if q == nil || !q.dead {
		return ""
	}
	names["#rn"] = attrRenewals
	if bi.renewals == 0 {
		return " AND attribute_not_exists(#rn)"
	}
	vals[":rn"] = numInt(bi.renewals)
	return " AND #rn = :rn"
}
