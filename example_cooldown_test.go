package sluice_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
)

// After a vendor's 429 with "retry-after: 20", cool the dimension down for
// the whole fleet: nothing is granted for 20 s, then one request at a time
// at the refill rate.
func ExampleClient_CooldownFor() {
	ctx := context.Background()
	client, _ := sluice.New(memstore.New(), sluice.WithClock(fixedClock()))
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "openai#rpm", Config: sluice.PerMinute(sluice.Requests, 60)})

	cd, err := client.CooldownFor(ctx, "openai#rpm", 20*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println(cd.Before, "→", cd.After, "until", cd.Until.Format(time.TimeOnly))

	res, _ := client.Acquire(ctx, "openai#rpm")
	fmt.Println(res.Outcome, res.RetryIn) // the 20 s, then 1 s to earn one request
	// Output:
	// 60 → 0 until 10:00:20
	// RETRY_IN 21s
}

// Cooldown takes the end itself, for a vendor that says when its limit
// resets.
func ExampleClient_Cooldown() {
	ctx := context.Background()
	client, _ := sluice.New(memstore.New(), sluice.WithClock(fixedClock()))
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "anthropic#rpm", Config: sluice.PerMinute(sluice.Requests, 50)})

	reset := time.Date(2026, 3, 4, 10, 0, 30, 0, time.UTC) // from the anthropic-ratelimit-requests-reset header
	_, _ = client.Cooldown(ctx, "anthropic#rpm", reset)

	s, _ := client.GetBucket(ctx, "anthropic#rpm")
	fmt.Println(s.CoolingDown(), s.CooldownUntil.Format(time.TimeOnly))
	// Output:
	// true 10:00:30
}

// Sync lowers a bucket to what the vendor's rate-limit headers report as
// remaining, when other clients of the same key spent some of it.
func ExampleClient_Sync() {
	ctx := context.Background()
	client, _ := sluice.New(memstore.New(), sluice.WithClock(fixedClock()))
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "openai#tpm", Config: sluice.PerMinute(sluice.Tokens, 30_000)})

	s, _ := client.Sync(ctx, "openai#tpm", 12_000) // x-ratelimit-remaining-tokens: 12000
	fmt.Println(s.Before, "→", s.After)
	s, _ = client.Sync(ctx, "openai#tpm", 20_000) // never raised
	fmt.Println(s.Before, "→", s.After)
	// Output:
	// 30000 → 12000
	// 12000 → 12000
}
