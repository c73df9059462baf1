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

// ExampleStore_PutUsage keeps two writers' totals for one caller and minute
// and sums them, as a usage-history reader does. A put replaces a row's
// totals whole, so the second put of writer w1 is not added to its first.
func ExampleStore_PutUsage() {
	ctx := context.Background()
	s := memstore.New()
	defer s.Close()
	minute := time.Now().UTC().Truncate(time.Minute)
	row := func(writer string, grants int64) store.UsageRow {
		return store.UsageRow{Dimension: "openai#rpm", Caller: "billing", Period: time.Minute, Start: minute,
			Writer: writer, Counters: map[string]int64{"grants": grants}, Updated: time.Now()}
	}
	for _, r := range []store.UsageRow{row("w1", 3), row("w1", 5), row("w2", 4)} {
		if err := s.PutUsage(ctx, []store.UsageRow{r}, store.UsageRetention{}); err != nil {
			panic(err)
		}
	}
	rows, err := s.ListUsage(ctx, store.UsageQuery{Dimension: "openai#rpm", Period: time.Minute, From: minute, To: minute.Add(time.Minute)})
	if err != nil {
		panic(err)
	}
	var grants int64
	for _, r := range rows {
		grants += r.Counters["grants"]
	}
	fmt.Println(len(rows), "rows,", grants, "grants")
	// Output: 2 rows, 9 grants
}
