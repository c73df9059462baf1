package vendors_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ontopix/sluice/vendors"
)

// A rate limit names its metric and delay; the caller cools the fleet down.
func ExampleClassify() {
	now := time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)
	body := []byte(`{"error":{"message":"Rate limit reached for gpt-4o in organization org-… on tokens per min (TPM): Limit 30000, Used 29937, Requested 385. Please try again in 644ms.", "type":"tokens", "code":"rate_limit_exceeded"}}`)

	c := vendors.Classify(vendors.OpenAI, http.StatusTooManyRequests, http.Header{}, body, now)
	fmt.Println(c.Kind, c.Metric, c.RetryAfter.Delay, c.RetryAfter.Source)
	if until, ok := c.CooldownUntil(); ok {
		fmt.Println("cool down until", until.Format(time.StampMilli))
	}
	// Output:
	// rate_limited tokens 644ms body
	// cool down until Nov 23 14:00:00.644
}

// A spend cap is not retryable: stop, with a clear error.
func ExampleClassify_quota() {
	now := time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)
	body := []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your API usage limits.","details":{"error_code":"enforced_spend_limit_reached"}}}`)

	c := vendors.Classify(vendors.Anthropic, http.StatusTooManyRequests, http.Header{}, body, now)
	err := c.Err()
	fmt.Println(c.Kind, c.Retryable(), errors.Is(err, vendors.ErrQuotaExhausted))
	fmt.Println(err)
	// Output:
	// quota_exhausted false true
	// vendors: anthropic quota exhausted, retrying will not help (HTTP 429 enforced_spend_limit_reached): You have reached your API usage limits.
}

// Gemini sends no headers; the delay and the quota come from the body.
func ExampleClassify_gemini() {
	now := time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)
	body := []byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"model":"gemini-2.0-flash","location":"global"}}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`)

	c := vendors.Classify(vendors.Gemini, http.StatusTooManyRequests, nil, body, now)
	fmt.Println(c.Kind, c.Metric, c.RetryAfter.Delay, c.QuotaID)
	// Output:
	// rate_limited requests 37s GenerateRequestsPerMinutePerProjectPerModel-FreeTier
}
