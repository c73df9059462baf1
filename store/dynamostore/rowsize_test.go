package dynamostore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// TestRowSizeOptions checks that New refuses per-bucket limits whose full
// bucket row could exceed DynamoDB's 400 KB item size, naming both options
// and their values, and accepts the defaults.
func TestRowSizeOptions(t *testing.T) {
	tests := []struct {
		leases, waiters int
		ok              bool
	}{
		{DefaultMaxLeasesPerBucket, DefaultMaxWaitersPerBucket, true},
		{MaxLeasesPerBucket, 47, true},
		{1, MaxWaitersPerBucket, true},
		{MaxLeasesPerBucket, MaxWaitersPerBucket, false},
		{MaxLeasesPerBucket, DefaultMaxWaitersPerBucket, false},
		{MaxLeasesPerBucket, 48, false},
	}
	for _, tt := range tests {
		_, err := New(newClient(), "sluice-x", WithMaxLeasesPerBucket(tt.leases), WithMaxWaitersPerBucket(tt.waiters))
		if got := err == nil; got != tt.ok {
			t.Errorf("New(leases %d, waiters %d) = %v; want ok %v", tt.leases, tt.waiters, err, tt.ok)
			continue
		}
		if err != nil {
			for _, want := range []string{"WithMaxLeasesPerBucket(" + strconv.Itoa(tt.leases) + ")", "WithMaxWaitersPerBucket(" + strconv.Itoa(tt.waiters) + ")", "400 KB"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("New(leases %d, waiters %d) = %q; want it to name %q", tt.leases, tt.waiters, err, want)
				}
			}
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("New(leases %d, waiters %d) = %v; want store.ErrInvalid", tt.leases, tt.waiters, err)
			}
		}
	}
}

// TestRowSizeWorstCaseFits writes to DynamoDB Local the largest row the
// defaults allow — every attribute at its longest, 6000 holders and 900
// tickets with the widest values — and checks that rowBytes counts it
// exactly and that DynamoDB accepts it.
func TestRowSizeWorstCaseFits(t *testing.T) {
	db := newClient()
	table := newTable(t, db)
	n, m := DefaultMaxLeasesPerBucket, DefaultMaxWaitersPerBucket
	item := worstRowForTest(n, m)
	if got, want := itemBytes(item), rowBytes(n, m); got != want {
		t.Errorf("itemBytes(worst row) = %d; rowBytes = %d", got, want)
	}
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatalf("PutItem of the worst-case row for the defaults (%d bytes): %v", itemBytes(item), err)
	}
}

// worstRowForTest builds the row rowBytes measures, with distinct ids.
func worstRowForTest(n, m int) map[string]types.AttributeValue {
	name := strings.Repeat("x", store.MaxNameLen)
	big := store.Bucket{Name: name, Config: bucket.Config{
		Capacity: bucket.MaxCapacity - 1, RefillAmount: bucket.MaxCapacity - 1,
		RefillPeriod: 999_999_999 * time.Millisecond, MaxDebt: bucket.MaxCapacity - 1,
		Type: bucket.Concurrent, CostPerCall: bucket.MaxCapacity - 1,
	}}
	st := bucket.State{Tokens: bucket.MinBalance + 1, Last: worstMs, Until: worstMs, Reserved: worstMs}
	cost := widest((bucket.MaxCapacity - 1) / int64(n))
	hs := make(map[string]holder, n)
	for range n {
		hs[store.NewLeaseID().String()] = holder{exp: worstMs, cost: cost, hasCost: true}
	}
	item := encodeBucket(big, st, 1<<62, opToken("incarnation"), hs)
	item[attrLastOp] = str(opToken("cancel-queued"))
	ws := make(map[string]types.AttributeValue, m)
	for range m {
		ws[store.NewLeaseID().String()] = ticketValue(store.Ticket{At: worstMs, Expires: worstMs})
	}
	item[attrWaiters] = &types.AttributeValueMemberM{Value: ws}
	return item
}

// TestRowFullIsTyped fills a concurrent bucket's row almost to DynamoDB's
// 400 KB with an attribute of its own, then checks that a queued
// acquisition whose ticket would not fit fails with a *WaiterLimitError
// (ErrTooManyWaiters) and a grant whose holder would not fit with a
// *LeaseLimitError (ErrTooManyLeases), instead of DynamoDB's raw
// ValidationException.
func TestRowFullIsTyped(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, tt := range []struct {
		name   string
		queued bool
	}{{"full#waiter", true}, {"full#holder", false}} {
		capacity := int64(1)
		if !tt.queued {
			capacity = 2
		}
		put(t, s, t0, store.Bucket{Name: tt.name, Config: bucket.ConcurrentSlots(capacity)})
		var res store.AcquireResult
		if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: tt.name}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res); err != nil || !res.Granted {
			t.Fatalf("%s: first acquisition = %+v, %v", tt.name, res, err)
		}
		// Pad the row to 30 bytes under the limit: no entry (54-60 bytes) fits.
		size := itemBytes(rawRow(t, s, tt.name))
		pad := strings.Repeat("p", maxItemBytes-size-len("test_pad")-30)
		if _, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.table), Key: map[string]types.AttributeValue{attrPK: str(tt.name)},
			UpdateExpression: aws.String("SET test_pad = :p"), ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(pad)},
		}); err != nil {
			t.Fatalf("%s: padding the row: %v", tt.name, err)
		}
		s.forget(tt.name)
		req := &store.AcquireRequest{Now: t0.Add(time.Millisecond), Items: []store.Item{{Dimension: tt.name}}, ID: store.NewLeaseID(), TTL: time.Minute}
		if tt.queued {
			req.Queue = time.Second
		}
		res = store.AcquireResult{}
		err := s.Acquire(ctx, req, &res)
		var wl *WaiterLimitError
		var ll *LeaseLimitError
		switch {
		case tt.queued && (!errors.As(err, &wl) || !errors.Is(err, ErrTooManyWaiters) || !wl.ItemFull || wl.Dimension != tt.name):
			t.Errorf("%s: queued acquisition on a full row = %+v, %v; want a *WaiterLimitError naming the bucket", tt.name, res, err)
		case !tt.queued && (!errors.As(err, &ll) || !errors.Is(err, ErrTooManyLeases) || !ll.ItemFull || ll.Dimension != tt.name):
			t.Errorf("%s: acquisition on a full row = %+v, %v; want a *LeaseLimitError naming the bucket", tt.name, res, err)
		case errors.Is(err, store.ErrUnavailable):
			t.Errorf("%s: %v matches ErrUnavailable", tt.name, err)
		}
	}
}
