package vendors_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
)

// A Reactor applies each vendor response to the fleet's buckets: a 2xx's
// headers lower the balances, a 429 cools the limit it names down.
func ExampleReactor() {
	ctx := context.Background()
	client, err := sluice.New(memstore.New())
	if err != nil {
		panic(err)
	}
	profile, err := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 500, TPM: 30_000})
	if err != nil {
		panic(err)
	}
	for _, b := range profile.Buckets() {
		if err := client.PutBucket(ctx, b); err != nil {
			panic(err)
		}
	}
	reactor := vendors.NewReactor(client, profile)

	ok := http.Header{}
	ok.Set("x-ratelimit-limit-tokens", "30000")
	ok.Set("x-ratelimit-remaining-tokens", "12000")
	re, err := reactor.Observe(ctx, 200, ok, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("synced:", re.Synced)

	limited := http.Header{}
	limited.Set("retry-after-ms", "644")
	body := []byte(`{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29937, Requested 385. Please try again in 644ms.","type":"tokens","code":"rate_limit_exceeded"}}`)
	re, err = reactor.Observe(ctx, 429, limited, body)
	if err != nil {
		panic(err)
	}
	fmt.Println("cooled:", re.Cooled, "rate limited:", errors.Is(re.Err(), vendors.ErrRateLimited))
	// Output:
	// synced: [openai#gpt-4o#tpm]
	// cooled: [openai#gpt-4o#tpm] rate limited: true
}
