package dynamostore

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// maxItemBytes is DynamoDB's item size limit: 400 KB.
const maxItemBytes = 400 * 1024

// worstMs is the widest Unix-ms time a holder's expiry or a ticket holds:
// any instant before the year 2286 has at most 13 significant digits.
// (The widest holder cost is computed in rowBytes: the costs of a bucket's
// holders add up to at most its capacity, so each has at most the digits
// of MaxCapacity divided by the number of holders.)
const worstMs = 9_999_999_999_999

// rowBytes returns the largest size, in DynamoDB's accounting, that a
// bucket row listing maxLeases holders and maxWaiters tickets can reach:
// every other attribute at its longest, and every entry encoded as the
// store encodes it, with the widest values it can hold.
func rowBytes(maxLeases, maxWaiters int) int {
	name := strings.Repeat("x", store.MaxNameLen)
	big := store.Bucket{Name: name, Config: bucket.Config{
		Capacity: bucket.MaxCapacity - 1, RefillAmount: bucket.MaxCapacity - 1,
		RefillPeriod: 999_999_999 * time.Millisecond, MaxDebt: bucket.MaxCapacity - 1,
		Type: bucket.Concurrent, CostPerCall: bucket.MaxCapacity - 1,
	}}
	st := bucket.State{Tokens: bucket.MinBalance + 1, Last: worstMs, Until: worstMs, Reserved: worstMs}
	item := encodeBucket(big, st, 1<<62, opToken("incarnation"), nil)
	item[attrLastOp] = str(opToken("cancel-queued"))
	item[attrWaiters] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
	n := itemBytes(item)
	id := store.NewLeaseID().String()
	cost := max(int64(1), (bucket.MaxCapacity-1)/int64(max(1, maxLeases)))
	n += maxLeases * mapEntryBytes(id, holder{exp: worstMs, cost: widest(cost), hasCost: true}.value())
	return n + maxWaiters*ticketBytes()
}

// ticketBytes is what one ticket of the waiters map takes at most.
func ticketBytes() int {
	return mapEntryBytes(store.NewLeaseID().String(), ticketValue(store.Ticket{At: worstMs, Expires: worstMs}))
}

// widest returns the longest repunit (1, 11, 111, …) not above v: a
// number with as many significant digits as any number up to v can have.
func widest(v int64) int64 {
	r := int64(1)
	for r <= (v-1)/10 {
		r = r*10 + 1
	}
	return r
}

// validateRowSize refuses a pair of limits whose full bucket row could
// exceed DynamoDB's 400 KB item size, naming both options.
func validateRowSize(maxLeases, maxWaiters int) error {
	n := rowBytes(maxLeases, maxWaiters)
	if n <= maxItemBytes {
		return nil
	}
	fit := max(0, (maxItemBytes-rowBytes(maxLeases, 0))/ticketBytes())
	return &bucket.FieldError{
		Field: "max_leases_per_bucket, max_waiters_per_bucket",
		Value: fmt.Sprintf("%d, %d", maxLeases, maxWaiters),
		Reason: fmt.Sprintf("WithMaxLeasesPerBucket(%d) with WithMaxWaitersPerBucket(%d) lets one bucket row grow to %d bytes, "+
			"more than DynamoDB's item limit of %d bytes (400 KB); with %d leases at most %d waiters fit: lower either option",
			maxLeases, maxWaiters, n, maxItemBytes, maxLeases, fit),
	}
}

// itemBytes returns an item's size in DynamoDB's accounting: the sum of
// its attributes' names and values.
func itemBytes(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueBytes(v)
	}
	return n
}

// mapEntryBytes returns what one entry takes in a map attribute: its key,
// its value, and one byte of overhead.
func mapEntryBytes(key string, v types.AttributeValue) int {
	return len(key) + valueBytes(v) + 1
}

// valueBytes returns a value's size in DynamoDB's accounting: a string's
// UTF-8 bytes; a number's one byte per two significant digits plus one
// (plus one for a sign); a map's 3 bytes plus its entries.
func valueBytes(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return numberBytes(x.Value)
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += mapEntryBytes(k, e)
		}
		return n
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	}
	return 0
}

func numberBytes(s string) int {
	sign := 0
	if strings.HasPrefix(s, "-") {
		sign, s = 1, s[1:]
	}
	digits := strings.Trim(strings.ReplaceAll(s, ".", ""), "0")
	return sign + (len(digits)+1)/2 + 1
}

// tooLarge reports whether err is DynamoDB refusing a write because the
// item would exceed 400 KB, as a single write (ValidationException) or in
// a cancelled transaction (a ValidationError reason).
func tooLarge(err error) bool {
	if err == nil {
		return false
	}
	sizeMsg := func(m string) bool {
		m = strings.ToLower(m)
		return strings.Contains(m, "item size") && strings.Contains(m, "exceeded")
	}
	for _, r := range reasons(err) {
		if reasonIs(r, "ValidationError") && r.Message != nil && sizeMsg(*r.Message) {
			return true
		}
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" && sizeMsg(ae.ErrorMessage())
}

// sizeLimit returns, for a write DynamoDB refused because a bucket row
// would exceed 400 KB (tooLarge), the typed error of the limit the row ran
// into: a *WaiterLimitError for a write taking a ticket, else a
// *LeaseLimitError; nil for any other error. names[i] is the bucket the
// write's i-th item updates (a transaction's reasons are in item order).
func (s *Store) sizeLimit(err error, names []string, ticket bool) error {
	if !tooLarge(err) || len(names) == 0 {
		return nil
	}
	name := names[0]
	for i, r := range reasons(err) {
		if reasonIs(r, "ValidationError") && i < len(names) {
			name = names[i]
			break
		}
	}
	if ticket {
		return &WaiterLimitError{Dimension: name, Limit: s.maxWaiters, ItemFull: true, err: err}
	}
	return &LeaseLimitError{Dimension: name, Limit: s.maxLeases, ItemFull: true, err: err}
}
