package sluice_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
)

// A fixed clock keeps the example's output deterministic.
func fixedClock() sluice.Clock {
	return sluice.ClockFunc(func() time.Time { return time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC) })
}

func Example() {
	ctx := context.Background()
	client, _ := sluice.New(memstore.New(), sluice.WithClock(fixedClock()))
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "openai#rpm", Config: sluice.PerMinute(sluice.Requests, 2)})

	for i := 0; i < 3; i++ {
		res, err := client.Acquire(ctx, "openai#rpm")
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Outcome, res.RetryIn)
	}
	// Output:
	// GRANTED 0s
	// GRANTED 0s
	// RETRY_IN 30s
}

func ExampleClient_AcquireMany() {
	ctx := context.Background()
	client, _ := sluice.New(memstore.New(), sluice.WithClock(fixedClock()))
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "openai#rpm", Config: sluice.PerMinute(sluice.Requests, 500)})
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "openai#tpm", Config: sluice.PerMinute(sluice.Tokens, 30_000)})

	// Reserve an estimate on both dimensions at once, all-or-nothing.
	res, _ := client.AcquireMany(ctx, []sluice.Request{{Dimension: "openai#rpm", Cost: 1}, {Dimension: "openai#tpm", Cost: 2_000}})
	fmt.Println(res.Outcome)

	// The response reported 2600 tokens: settle the estimate.
	_, _ = res.Lease.Settle(ctx, "openai#tpm", 2_600)
	_ = res.Lease.Release(ctx)

	s, _ := client.GetBucket(ctx, "openai#tpm")
	fmt.Println(s.Tokens.Tokens())
	// Output:
	// GRANTED
	// 27400
}

func ExampleClient_WithSlot() {
	ctx := context.Background()
	client, _ := sluice.New(memstore.New())
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "elevenlabs#concurrent", Config: sluice.ConcurrentLimit(5)})

	// The wait for a slot, and the call, end at the context's deadline.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := client.WithSlot(ctx, "elevenlabs#concurrent", func(ctx context.Context, l *sluice.Lease) error {
		fmt.Println("holding one of 5 slots")
		return nil // call the vendor here
	})
	fmt.Println(err)
	// Output:
	// holding one of 5 slots
	// <nil>
}

func ExampleLease_Settle() {
	ctx := context.Background()
	client, _ := sluice.New(memstore.New(), sluice.WithClock(fixedClock()))
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "anthropic#otpm", Config: sluice.PerMinute(sluice.Tokens, 8_000)})

	// Reserve the request's max_tokens as the estimate...
	res, _ := client.Acquire(ctx, "anthropic#otpm", sluice.WithCost(4_000))
	lease := res.Lease
	defer lease.Release(ctx)

	// ...and settle to the output tokens the response reported: the
	// difference goes back to the bucket at once.
	s, err := lease.Settle(ctx, "anthropic#otpm", 1_200)
	if err != nil {
		panic(err)
	}
	fmt.Println(lease.Cost("anthropic#otpm"), s.Remaining.Tokens())
	// Output:
	// 1200 6800
}
