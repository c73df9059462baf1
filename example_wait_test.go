package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
)

// Wait reserves: when the store answers that the tokens come back later
// than the caller is willing to wait, it fails at once and reserves
// nothing.
func ExampleClient_Wait() {
	ctx := context.Background()
	client, _ := sluice.New(memstore.New(), sluice.WithClock(fixedClock()))
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "openai#tpm", Config: sluice.PerMinute(sluice.Tokens, 30_000)})
	_, _ = client.Acquire(ctx, "openai#tpm", sluice.WithCost(30_000)) // drain it

	// The wait ends at the context's deadline.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := client.Wait(wctx, []sluice.Request{{Dimension: "openai#tpm", Cost: 10_000}})
	var te *sluice.SlotTimeoutError
	if errors.As(err, &te) {
		fmt.Println("no slot within", te.Timeout.Round(time.Second), "- the wait is", te.RetryIn, "after", te.Attempts, "attempt")
	}
	// Output:
	// no slot within 5s - the wait is 20s after 1 attempt
}

// WithPolling makes a wait poll instead of waiting in line: ask, sleep
// the RETRY_IN answer plus jitter, ask again.
func ExampleWithPolling() {
	ctx := context.Background()
	client, _ := sluice.New(memstore.New())
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "openai#rpm", Config: sluice.PerMinute(sluice.Requests, 500)})

	var attempts int
	l, err := client.Wait(ctx, []sluice.Request{{Dimension: "openai#rpm", Cost: 1}}, sluice.WithPolling(), sluice.WithAttemptCount(&attempts))
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)
	fmt.Println("granted after", attempts, "attempt")
	// Output:
	// granted after 1 attempt
}

// WithAttemptCount tells the caller how many store decisions a wait took:
// one reservation, even when it slept until the reservation was valid.
func ExampleWithAttemptCount() {
	ctx := context.Background()
	client, _ := sluice.New(memstore.New())
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "openai#rpm", Config: sluice.PerMinute(sluice.Requests, 500)})

	var attempts int
	l, err := client.Wait(ctx, []sluice.Request{{Dimension: "openai#rpm", Cost: 1}}, sluice.WithAttemptCount(&attempts))
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)
	fmt.Println("granted after", attempts, "attempt")
	// Output:
	// granted after 1 attempt
}
