package dynamostore

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// TestFaults injects what DynamoDB Local never produces — throttling, 5xx
// and TransactionConflict cancellations — through an http.RoundTripper,
// and checks the SDK's bounded retries, the store's error mapping
// (ErrUnavailable, fail-closed; ErrContention) and recovery.
func TestFaults(t *testing.T) {
	throttle := func() *http.Response {
		return apiError(400, "ProvisionedThroughputExceededException", "The level of configured provisioned throughput for the table was exceeded.", nil)
	}
	throttling := func() *http.Response {
		return apiError(400, "ThrottlingException", "Rate of requests exceeds the allowed throughput.", nil)
	}
	unavailable := func() *http.Response { return apiError(503, "ServiceUnavailable", "unavailable", nil) }
	internal := func() *http.Response { return apiError(500, "InternalServerError", "internal", nil) }
	conflict := func() *http.Response {
		return apiError(400, "TransactionCanceledException", "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict, None]",
			map[string]any{"CancellationReasons": []map[string]any{{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}, {"Code": "None"}}})
	}
	tests := []struct {
		name     string
		op       string // operation the fault hits
		fault    func() *http.Response
		times    int64 // faults before passing requests through; -1 forever
		record   bool
		want     error // nil: granted
		attempts int   // requests of op expected
	}{
		{"throttled once, SDK retries", "UpdateItem", throttle, 1, false, nil, 2},
		{"ThrottlingException once", "UpdateItem", throttling, 1, false, nil, 2},
		{"503 twice, SDK retries", "UpdateItem", unavailable, 2, false, nil, 3},
		{"throttled throughout: fail closed", "UpdateItem", throttle, -1, false, store.ErrUnavailable, SDKMaxAttempts},
		{"500 throughout: fail closed", "TransactWriteItems", internal, -1, true, store.ErrUnavailable, SDKMaxAttempts},
		{"read throttled throughout", "GetItem", throttle, -1, false, store.ErrUnavailable, SDKMaxAttempts},
		{"TransactionConflict: contention, not retried by the SDK", "TransactWriteItems", conflict, -1, true, store.ErrContention, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTap()
			db := tp.client()
			table := newTable(t, db)
			s := openStore(t, db, table, WithUncheckedLeaseIDs()) // the single-UpdateItem path
			put(t, s, t0, store.Bucket{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)})
			if tt.op != "GetItem" {
				acquireOnce(t, s, t0, false, store.Item{Dimension: "v#rpm"}) // warm: the next acquire only writes
			}
			var left atomic.Int64
			left.Store(tt.times)
			tp.reset()
			tp.fault = func(op string) *http.Response {
				if op != tt.op || left.Load() == 0 {
					return nil
				}
				left.Add(-1)
				return tt.fault()
			}
			var res store.AcquireResult
			req := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "v#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute, Record: tt.record}
			err := s.Acquire(context.Background(), req, &res)
			ops, _, _ := tp.snapshot()
			if tt.want == nil && (err != nil || !res.Granted) {
				t.Fatalf("Acquire = %+v, %v; want granted after the SDK's retries", res, err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Acquire error = %v, want %v", err, tt.want)
			}
			if ops[tt.op] != tt.attempts {
				t.Errorf("%s sent %d times (%v), want %d", tt.op, ops[tt.op], ops, tt.attempts)
			}
			tp.fault = nil
			// Nothing was half-applied: the bucket holds exactly what the
			// grants took (1 warm-up grant, plus 1 if this one succeeded).
			want := int64(100_000)
			if tt.op != "GetItem" {
				want -= 1000
			}
			if err == nil {
				want -= 1000
			}
			st, perr := s.Peek(context.Background(), store.PeekRequest{Now: t0, Dimensions: []string{"v#rpm"}})
			if perr != nil || st[0].Tokens != want {
				t.Errorf("after: %+v %v; want %d millitokens", st, perr, want)
			}
		})
	}
}

// TestFailurePolicy runs the root client over a throttled table: fail
// closed returns ErrUnavailable, fail open grants flagged as degraded.
func TestFailurePolicy(t *testing.T) {
	tp := newTap()
	db := tp.client()
	table := newTable(t, db)
	s := openStore(t, db, table)
	put(t, s, time.Now(), store.Bucket{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)})
	tp.fault = func(string) *http.Response {
		return apiError(400, "ProvisionedThroughputExceededException", "throttled", nil)
	}
	closed, err := sluice.New(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := closed.Acquire(context.Background(), "v#rpm"); !errors.Is(err, sluice.ErrUnavailable) {
		t.Errorf("fail closed: %v, want ErrUnavailable", err)
	}
	open, err := sluice.New(s, sluice.WithConfig(failOpen()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := open.Acquire(context.Background(), "v#rpm")
	if err != nil || !r.Granted() || !r.Degraded {
		t.Errorf("fail open: %+v, %v; want granted, degraded", r, err)
	}
}

// failOpen returns the default Config failing open.
func failOpen() sluice.Config {
	cfg := sluice.DefaultConfig()
	cfg.FailurePolicy = sluice.FailOpen
	return cfg
}
