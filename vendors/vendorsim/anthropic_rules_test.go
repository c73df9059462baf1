package vendorsim

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// Anthropic RPM 60 is one request per second, and a 429 consumes nothing.
func TestAnthropicRPM(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: Anthropic, Limits: Limits{RPM: 60}})
	wantStatus(t, post(t, s, PathMessages, messagesBody(1, 10)), http.StatusOK)
	w := post(t, s, PathMessages, messagesBody(1, 10))
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeader(t, w, "Retry-After", "1")
	wantHeader(t, w, "Retry-After-Ms", "")
	clk.Add(999 * time.Millisecond)
	wantStatus(t, post(t, s, PathMessages, messagesBody(1, 10)), http.StatusTooManyRequests)
	clk.Add(time.Millisecond)
	wantStatus(t, post(t, s, PathMessages, messagesBody(1, 10)), http.StatusOK)
	if ms := metricStats(t, s, MetricRequests); ms.Counted != 2 || ms.Denied != 2 {
		t.Errorf("requests counted %d denied %d, want 2 and 2", ms.Counted, ms.Denied)
	}
}

// OTPM counts the output produced, not max_tokens, admits while positive
// and goes into debt.
func TestAnthropicOTPMCountsOutput(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: Anthropic, Limits: Limits{OTPM: 6000}})
	// max_tokens far above OTPM is no obstacle.
	wantStatus(t, post(t, s, PathMessages, messagesBody(1, 100000), HeaderOutputTokens, "6500"), http.StatusOK)
	if ms := metricStats(t, s, MetricOutputTokens); ms.Counted != 6500 || ms.Debt != 500 {
		t.Fatalf("output counted %d debt %d, want 6500 and 500", ms.Counted, ms.Debt)
	}
	w := post(t, s, PathMessages, messagesBody(1, 10))
	wantStatus(t, w, http.StatusTooManyRequests)
	// 500 tokens of debt at 100 per second: 5 s, and then a positive
	// balance one nanosecond later.
	wantHeader(t, w, "Retry-After", "6")
	var body anErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	want := "This request would exceed your organization's (org-sim) rate limit of 6000 output tokens per minute (model: claude-sonnet-4-5). " +
		"For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. " +
		"Please reduce the prompt length or the maximum tokens requested, or try again later."
	if body.Type != "error" || body.Error.Type != "rate_limit_error" || body.Error.Message != want {
		t.Errorf("429 body = %s", w.Body.String())
	}
	clk.Add(5 * time.Second)
	wantStatus(t, post(t, s, PathMessages, messagesBody(1, 10)), http.StatusTooManyRequests)
	clk.Add(time.Nanosecond)
	wantStatus(t, post(t, s, PathMessages, messagesBody(1, 10), HeaderOutputTokens, "1"), http.StatusOK)
}

// Cache reads do not count against ITPM; cache writes do.
func TestAnthropicITPMExcludesCacheReads(t *testing.T) {
	s, _ := newSim(t, Config{Vendor: Anthropic, Limits: Limits{ITPM: 1000}})
	// 1200 tokens, more than ITPM, but 300 are cache reads.
	w := post(t, s, PathMessages, messagesBody(1200, 10), HeaderCacheReadTokens, "300", HeaderCacheCreationTokens, "100")
	wantStatus(t, w, http.StatusOK)
	var msg anMessage
	if err := json.Unmarshal(w.Body.Bytes(), &msg); err != nil {
		t.Fatal(err)
	}
	if got, want := msg.Usage, (anUsage{InputTokens: 800, CacheCreationInputTokens: 100, CacheReadInputTokens: 300, OutputTokens: 10}); got != want {
		t.Errorf("usage = %+v, want %+v", got, want)
	}
	if got := metricStats(t, s, MetricInputTokens).Counted; got != 900 {
		t.Errorf("input tokens counted = %d, want 900 (800 uncached + 100 cache writes)", got)
	}
	// 100 left: 101 uncached are refused, 100 with the rest cached pass.
	wantStatus(t, post(t, s, PathMessages, messagesBody(101, 10)), http.StatusTooManyRequests)
	wantStatus(t, post(t, s, PathMessages, messagesBody(150, 10), HeaderCacheReadTokens, "50"), http.StatusOK)
	// More uncached input than ITPM can never pass: no retry-after.
	w = post(t, s, PathMessages, messagesBody(1001, 10))
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeader(t, w, "Retry-After", "")
	if st := s.Stats(); st.TooLarge != 1 || st.RateLimited != 1 {
		t.Errorf("TooLarge %d RateLimited %d, want 1 and 1", st.TooLarge, st.RateLimited)
	}
	wantStatus(t, post(t, s, PathMessages, messagesBody(10, 10), HeaderCacheReadTokens, "11"), http.StatusBadRequest)
}

func TestAnthropicHeaders(t *testing.T) {
	s, _ := newSim(t, Config{Vendor: Anthropic, Limits: Limits{RPM: 50, ITPM: 40000, OTPM: 8000}})
	w := post(t, s, PathMessages, messagesBody(1499, 10))
	wantStatus(t, w, http.StatusOK)
	for name, want := range map[string]string{
		"Anthropic-Ratelimit-Requests-Limit":          "50",
		"Anthropic-Ratelimit-Requests-Remaining":      "49",
		"Anthropic-Ratelimit-Requests-Reset":          "2026-03-01T12:00:02Z", // 1.2 s, rounded up
		"Anthropic-Ratelimit-Input-Tokens-Limit":      "40000",
		"Anthropic-Ratelimit-Input-Tokens-Remaining":  "39000",                // 38501
		"Anthropic-Ratelimit-Input-Tokens-Reset":      "2026-03-01T12:00:03Z", // 2.2485 s
		"Anthropic-Ratelimit-Output-Tokens-Limit":     "8000",
		"Anthropic-Ratelimit-Output-Tokens-Remaining": "8000",
		"Anthropic-Ratelimit-Output-Tokens-Reset":     "2026-03-01T12:00:00Z",
		"Anthropic-Ratelimit-Tokens-Limit":            "48000",
		"Anthropic-Ratelimit-Tokens-Remaining":        "47000", // 46501
		"Anthropic-Ratelimit-Tokens-Reset":            "2026-03-01T12:00:03Z",
	} {
		wantHeader(t, w, name, want)
	}
}

func TestAnthropicSpendLimit(t *testing.T) {
	s, _ := newSim(t, Config{Vendor: Anthropic, QuotaExhausted: true})
	w := post(t, s, PathMessages, messagesBody(1, 10))
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeader(t, w, "Retry-After", "")
	want := `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your specified API usage limits. ` +
		`You will regain access on 2026-04-01 at 00:00 UTC.","details":{"error_code":"enforced_spend_limit_reached"}}}`
	if got := w.Body.String(); got != want {
		t.Errorf("body = %s, want %s", got, want)
	}
}

// Azure: TPM is a count per calendar minute, charged input + max_tokens and
// never refunded; RPM allows ceil(RPM/60) requests per calendar second,
// and rejected requests count.
func TestAzureFixedWindows(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: Azure, Limits: Limits{TPM: 6000}}) // RPM 36: 1 per second
	w := post(t, s, "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
		`{"messages":[{"role":"user","content":"abcd"}],"max_tokens":2000}`, HeaderOutputTokens, "1")
	wantStatus(t, w, http.StatusOK)
	for name, want := range map[string]string{
		"X-Ratelimit-Limit-Requests": "36", "X-Ratelimit-Remaining-Requests": "35", "X-Ratelimit-Reset-Requests": "60",
		"X-Ratelimit-Limit-Tokens": "6000", "X-Ratelimit-Remaining-Tokens": "3999", "X-Ratelimit-Reset-Tokens": "60",
	} {
		wantHeader(t, w, name, want)
	}
	w = post(t, s, PathChatCompletions, chatBody(1, 10))
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeader(t, w, "Retry-After-Ms", "1000")
	clk.Add(time.Second)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 2000), HeaderOutputTokens, "1"), http.StatusOK)
	// No refund: 4002 counted of 6000, another 2001 does not fit.
	clk.Add(time.Second)
	w = post(t, s, PathChatCompletions, chatBody(1, 2000))
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeader(t, w, "Retry-After", "58")
	// That rejection took this second's request.
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 1)), http.StatusTooManyRequests)
	clk.Add(58 * time.Second)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 2000)), http.StatusOK)
	ms := metricStats(t, s, MetricTokens)
	if ms.Counted != 3*2001 || ms.Allowance != 2*6000 {
		t.Errorf("tokens counted %d allowance %d, want %d and %d", ms.Counted, ms.Allowance, 3*2001, 2*6000)
	}
}
