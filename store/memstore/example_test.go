package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// Example shares the SDKs' example openai#rpm limit (100 requests per minute) with
// an embedded store: the 101st request in the same instant must wait 600 ms.
func Example() {
	ctx := context.Background()
	s := memstore.New()
	defer s.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rpm := store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)}
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: now, Bucket: rpm}); err != nil {
		panic(err)
	}
	req := &store.AcquireRequest{Now: now, Items: []store.Item{{Dimension: "openai#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute}
	var res store.AcquireResult
	for range 100 {
		if err := s.Acquire(ctx, req, &res); err != nil || !res.Granted {
			panic("denied")
		}
	}
	_ = s.Acquire(ctx, req, &res)
	fmt.Println("granted:", res.Granted, "retry in:", res.RetryIn)

	req.Now = now.Add(res.RetryIn)
	_ = s.Acquire(ctx, req, &res)
	fmt.Println("granted:", res.Granted, "remaining millitokens:", res.Items[0].Remaining)
	// Output:
	// granted: false retry in: 600ms
	// granted: true remaining millitokens: 0
}
