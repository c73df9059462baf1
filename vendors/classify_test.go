package vendors

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The bodies below are the vendors' own examples, verbatim where a source
// quotes them in full.
const (
	openAIRateLimit = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-… on tokens per min (TPM): Limit 30000, Used 29937, Requested 385. Please try again in 644ms.", "type":"tokens", "code":"rate_limit_exceeded"}}`
	openAIQuota     = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	openAITooLarge  = `{"error":{"message":"Request too large for gpt-4 in organization org-… on tokens per min (TPM): Limit 10000, Requested 15000. The input or output tokens must be reduced in order to run successfully.","type":"tokens","code":"rate_limit_exceeded"}}`
	openAIRPD       = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-… on requests per day (RPD): Limit 10000, Used 10000, Requested 1. Please try again in 8.64s.","type":"requests","code":"rate_limit_exceeded"}}`
	groqTooLarge    = "{\"error\":{\"message\":\"Request too large for model `llama-3.1-8b-instant` in organization `org_…` service tier `on_demand` on tokens per minute (TPM): Limit 8000, Requested 10098, please reduce your message size and try again.\",\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}"
	groqRateLimit   = "{\"error\":{\"message\":\"Rate limit reached for model `llama-3.3-70b-versatile` in organization `org_…` service tier `on_demand` on tokens per minute (TPM): Limit 12000, Used 11876, Requested 512. Please try again in 1.94s.\",\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}"

	anthropicRateLimit = `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization (…) of 50,000 input tokens per minute."}}`
	anthropicSpend     = `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your API usage limits: your organization has crossed its monthly API usage threshold. You will regain access on 2026-12-01 at 00:00 UTC.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_018EeWyXxfu5pfWkrYcMdjWG"}`
	anthropicTooLarge  = `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`
	anthropicOverload  = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`

	geminiPerMinute = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"}}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`
	geminiInputTPM  = `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-pro"}}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}`
	geminiPerDay    = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"}},{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"}}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`

	elevenConcurrent = `{"detail":{"status":"too_many_concurrent_requests","message":"Too many concurrent requests for your subscription."}}`
	elevenBusy       = `{"detail":{"status":"system_busy","message":"Our services are experiencing high levels of traffic."}}`
	elevenQuota      = `{"detail":{"status":"quota_exceeded","message":"This request exceeds your quota. You have 12 credits remaining, while 480 credits are required for this request."}}`
	elevenTooLong    = `{"detail":{"status":"max_character_limit_exceeded","message":"Text is too long."}}`

	azureRateLimit          = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-02-01 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 33 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."}}`
	openRouterDaily         = `{"error":{"message":"Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model requests per day","code":429}}`
	openRouterMinute        = `{"error":{"message":"Rate limit exceeded: free-models-per-min.","code":429}}`
	anthropicWorkspaceLimit = `{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits. You will regain access on 2026-12-01 at 00:00 UTC."}}`
	anthropicCredit         = `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`

	azureCapacity = `{"error":{"code":"429","message":"The server is temporarily unable to process your request. Please try again later."}}`
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name      string
		vendor    Vendor
		status    int
		h         http.Header
		body      string
		kind      Kind
		metric    Metric
		code      string
		retry     RetryDelay
		limit     int64 // 0: unknown
		requested int64
		quotaID   string
		sentinel  error
	}{
		{name: "OpenAI rate limit, delay from the message", vendor: OpenAI, status: 429, body: openAIRateLimit,
			kind: RateLimited, metric: Tokens, code: "rate_limit_exceeded", retry: RetryDelay{644 * time.Millisecond, true, "body"},
			limit: 30000, requested: 385, sentinel: ErrRateLimited},
		{name: "OpenAI rate limit, retry-after-ms beats the message", vendor: OpenAI, status: 429, body: openAIRateLimit,
			h:    header("retry-after-ms", "700", "retry-after", "1"),
			kind: RateLimited, metric: Tokens, code: "rate_limit_exceeded", retry: RetryDelay{700 * time.Millisecond, true, "retry-after-ms"},
			limit: 30000, requested: 385, sentinel: ErrRateLimited},
		{name: "OpenAI rate limit, retry-after beats the message", vendor: OpenAI, status: 429, body: openAIRateLimit,
			h:    header("retry-after", "1"),
			kind: RateLimited, metric: Tokens, code: "rate_limit_exceeded", retry: RetryDelay{time.Second, true, "retry-after"},
			limit: 30000, requested: 385, sentinel: ErrRateLimited},
		{name: "OpenAI requests per day", vendor: OpenAI, status: 429, body: openAIRPD,
			kind: RateLimited, metric: RequestsPerDay, code: "rate_limit_exceeded", retry: RetryDelay{8640 * time.Millisecond, true, "body"},
			limit: 10000, requested: 1, sentinel: ErrRateLimited},
		{name: "OpenAI insufficient_quota", vendor: OpenAI, status: 429, body: openAIQuota,
			kind: QuotaExhausted, code: "insufficient_quota", sentinel: ErrQuotaExhausted},
		{name: "OpenAI request too large", vendor: OpenAI, status: 429, body: openAITooLarge,
			kind: TooLarge, metric: Tokens, code: "rate_limit_exceeded", limit: 10000, requested: 15000, sentinel: ErrRequestTooLarge},
		{name: "Groq 413", vendor: Groq, status: 413, body: groqTooLarge,
			kind: TooLarge, metric: Tokens, code: "rate_limit_exceeded", limit: 8000, requested: 10098, sentinel: ErrRequestTooLarge},
		{name: "Groq rate limit", vendor: Groq, status: 429, body: groqRateLimit, h: header("retry-after", "2"),
			kind: RateLimited, metric: Tokens, code: "rate_limit_exceeded", retry: RetryDelay{2 * time.Second, true, "retry-after"},
			limit: 12000, requested: 512, sentinel: ErrRateLimited},
		{name: "Anthropic rate limit", vendor: Anthropic, status: 429, body: anthropicRateLimit, h: header("retry-after", "30"),
			kind: RateLimited, metric: InputTokens, code: "rate_limit_error", retry: RetryDelay{30 * time.Second, true, "retry-after"}, sentinel: ErrRateLimited},
		{name: "Anthropic spend limit", vendor: Anthropic, status: 429, body: anthropicSpend,
			kind: QuotaExhausted, code: "enforced_spend_limit_reached", sentinel: ErrQuotaExhausted},
		{name: "Anthropic 413", vendor: Anthropic, status: 413, body: anthropicTooLarge,
			kind: TooLarge, code: "request_too_large", sentinel: ErrRequestTooLarge},
		{name: "Anthropic 529", vendor: Anthropic, status: 529, body: anthropicOverload,
			kind: Overloaded, code: "overloaded_error", sentinel: ErrOverloaded},
		{name: "Gemini per minute", vendor: Gemini, status: 429, body: geminiPerMinute,
			kind: RateLimited, metric: Requests, code: "RESOURCE_EXHAUSTED", retry: RetryDelay{37 * time.Second, true, "body"},
			quotaID: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", sentinel: ErrRateLimited},
		{name: "Gemini input tokens", vendor: Gemini, status: 429, body: geminiInputTPM,
			kind: RateLimited, metric: InputTokens, code: "RESOURCE_EXHAUSTED", retry: RetryDelay{30 * time.Second, true, "body"},
			quotaID: "GenerateContentInputTokensPerModelPerMinute-FreeTier", sentinel: ErrRateLimited},
		{name: "Gemini per day is exhausted until midnight", vendor: Gemini, status: 429, body: geminiPerDay,
			kind: QuotaExhausted, metric: RequestsPerDay, code: "RESOURCE_EXHAUSTED", retry: RetryDelay{37 * time.Second, true, "body"},
			quotaID: "GenerateRequestsPerDayPerProjectPerModel-FreeTier", sentinel: ErrQuotaExhausted},
		{name: "Gemini error wrapped in an array", vendor: Gemini, status: 429, body: "[" + geminiPerMinute + "]",
			kind: RateLimited, metric: Requests, code: "RESOURCE_EXHAUSTED", retry: RetryDelay{37 * time.Second, true, "body"},
			quotaID: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", sentinel: ErrRateLimited},
		{name: "ElevenLabs concurrency", vendor: ElevenLabs, status: 429, body: elevenConcurrent,
			kind: ConcurrencyLimited, code: "too_many_concurrent_requests", sentinel: ErrConcurrencyLimited},
		{name: "ElevenLabs system busy", vendor: ElevenLabs, status: 429, body: elevenBusy,
			kind: Overloaded, code: "system_busy", sentinel: ErrOverloaded},
		{name: "ElevenLabs quota", vendor: ElevenLabs, status: 401, body: elevenQuota,
			kind: QuotaExhausted, code: "quota_exceeded", sentinel: ErrQuotaExhausted},
		{name: "ElevenLabs too many characters", vendor: ElevenLabs, status: 400, body: elevenTooLong,
			kind: TooLarge, code: "max_character_limit_exceeded", sentinel: ErrRequestTooLarge},
		{name: "ElevenLabs string detail", vendor: ElevenLabs, status: 401, body: `{"detail":"Invalid API key"}`,
			kind: OtherError, sentinel: ErrVendor},
		{name: "Azure rate limit, delay from the message", vendor: Azure, status: 429, body: azureRateLimit,
			kind: RateLimited, metric: Tokens, retry: RetryDelay{33 * time.Second, true, "body"}, sentinel: ErrRateLimited},
		{name: "Azure rate limit, retry-after-ms beats the message", vendor: Azure, status: 429, body: azureRateLimit,
			h:    header("retry-after-ms", "33000", "x-ratelimit-reset-tokens", "0"),
			kind: RateLimited, metric: Tokens, retry: RetryDelay{33 * time.Second, true, "retry-after-ms"}, sentinel: ErrRateLimited},
		{name: "Azure capacity", vendor: Azure, status: 429, body: azureCapacity,
			kind: Overloaded, sentinel: ErrOverloaded},
		{name: "OpenRouter free daily cap", vendor: OpenRouter, status: 429, body: openRouterDaily,
			kind: QuotaExhausted, metric: RequestsPerDay, sentinel: ErrQuotaExhausted},
		{name: "OpenRouter free per-minute cap", vendor: OpenRouter, status: 429, body: openRouterMinute,
			kind: RateLimited, metric: Requests, sentinel: ErrRateLimited},
		{name: "Anthropic workspace spend limit (400)", vendor: Anthropic, status: 400, body: anthropicWorkspaceLimit,
			kind: QuotaExhausted, code: "invalid_request_error", sentinel: ErrQuotaExhausted},
		{name: "Anthropic credit balance (400)", vendor: Anthropic, status: 400, body: anthropicCredit,
			kind: QuotaExhausted, code: "invalid_request_error", sentinel: ErrQuotaExhausted},
		{name: "429 that is not JSON", vendor: OpenRouter, status: 429, body: "<html>slow down</html>", h: header("retry-after", "5"),
			kind: RateLimited, retry: RetryDelay{5 * time.Second, true, "retry-after"}, sentinel: ErrRateLimited},
		{name: "429 with nothing", vendor: OpenAI, status: 429, kind: RateLimited, sentinel: ErrRateLimited},
		{name: "503", vendor: OpenAI, status: 503, body: `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error"}}`,
			kind: Overloaded, code: "server_error", sentinel: ErrOverloaded},
		{name: "500", vendor: OpenAI, status: 500, body: "Internal Server Error", kind: OtherError, sentinel: ErrVendor},
		{name: "400", vendor: Anthropic, status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`,
			kind: OtherError, code: "invalid_request_error", sentinel: ErrVendor},
		{name: "a mistyped field does not hide the others", vendor: OpenAI, status: 429, body: `{"error":{"message":42,"type":"insufficient_quota","code":null}}`,
			kind: QuotaExhausted, code: "insufficient_quota", sentinel: ErrQuotaExhausted},
		{name: "200", vendor: OpenAI, status: 200, body: openAIQuota, h: header("x-ratelimit-remaining-requests", "5"), kind: OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Classify(tt.vendor, tt.status, tt.h, []byte(tt.body), testNow)
			if c.Kind != tt.kind || c.Metric != tt.metric || c.Code != tt.code || c.RetryAfter != tt.retry || c.QuotaID != tt.quotaID {
				t.Errorf("got kind %v, metric %q, code %q, retry %+v, quota %q; want %v, %q, %q, %+v, %q",
					c.Kind, c.Metric, c.Code, c.RetryAfter, c.QuotaID, tt.kind, tt.metric, tt.code, tt.retry, tt.quotaID)
			}
			if c.Limit.Known != (tt.limit != 0) || c.Limit.Value != tt.limit || c.Requested.Value != tt.requested {
				t.Errorf("limit %+v, requested %+v; want %d, %d", c.Limit, c.Requested, tt.limit, tt.requested)
			}
			if c.Vendor != tt.vendor || c.Status != tt.status || !c.At.Equal(testNow) {
				t.Errorf("vendor %q, status %d, at %v; want %q, %d, %v", c.Vendor, c.Status, c.At, tt.vendor, tt.status, testNow)
			}
			wantRetryable := tt.kind == RateLimited || tt.kind == Overloaded || tt.kind == ConcurrencyLimited
			if c.Retryable() != wantRetryable {
				t.Errorf("Retryable() = %v, want %v", c.Retryable(), wantRetryable)
			}
			until, ok := c.CooldownUntil()
			if wantOK := tt.kind == RateLimited && tt.retry.Known; ok != wantOK || ok && !until.Equal(testNow.Add(tt.retry.Delay)) {
				t.Errorf("CooldownUntil() = %v, %v; want ok %v at %v", until, ok, wantOK, testNow.Add(tt.retry.Delay))
			}
			err := c.Err()
			if tt.sentinel == nil {
				if err != nil {
					t.Errorf("Err() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("Err() = %v, want it to match %v", err, tt.sentinel)
			}
			var ve *Error
			if !errors.As(err, &ve) || ve.Kind != tt.kind || ve.Vendor != tt.vendor || ve.Message != c.Message {
				t.Errorf("Err() = %#v, want an *Error with kind %v and the vendor's message", err, tt.kind)
			}
		})
	}
}

func TestClassifyMessageIsVerbatim(t *testing.T) {
	c := Classify(OpenAI, 429, nil, []byte(openAIQuota), testNow)
	want := "You exceeded your current quota, please check your plan and billing details."
	if c.Message != want {
		t.Errorf("Message = %q, want %q", c.Message, want)
	}
	got := c.Err().Error()
	wantErr := "vendors: openai quota exhausted, retrying will not help (HTTP 429 insufficient_quota): " + want
	if got != wantErr {
		t.Errorf("Error() = %q, want %q", got, wantErr)
	}
	if errors.Is(c.Err(), ErrRateLimited) {
		t.Error("a quota error matches ErrRateLimited")
	}
}

func TestClassifyHugeBodyIgnored(t *testing.T) {
	body := append([]byte(openAIQuota), bytes.Repeat([]byte(" "), maxBody)...)
	c := Classify(OpenAI, 429, nil, body, testNow)
	if c.Kind != RateLimited || c.Code != "" {
		t.Errorf("kind %v code %q for an oversized body, want rate_limited from the status alone", c.Kind, c.Code)
	}
}

func TestClassifyBadRetryDelayIsAProblem(t *testing.T) {
	body := strings.Replace(geminiPerMinute, `"37s"`, `"-5s"`, 1)
	c := Classify(Gemini, 429, nil, []byte(body), testNow)
	if c.RetryAfter.Known {
		t.Errorf("RetryAfter = %+v from a negative retryDelay, want unknown", c.RetryAfter)
	}
	if _, ok := c.CooldownUntil(); ok {
		t.Error("CooldownUntil known without a delay")
	}
	if len(c.Signals.Problems) != 1 || !strings.Contains(c.Signals.Problems[0].Error(), "retryDelay") {
		t.Errorf("Problems = %v, want one naming retryDelay", c.Signals.Problems)
	}
}

func TestClassifySignals(t *testing.T) {
	h := header("x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6m0s")
	c := Classify(OpenAI, 429, h, []byte(openAIRateLimit), testNow)
	if m := c.Signals.Metric(Tokens); !m.Remaining.Known || m.Remaining.Value != 0 || !m.Reset.At.Equal(testNow.Add(6*time.Minute)) {
		t.Errorf("Signals tokens = %+v, want remaining 0 and reset in 6m", m)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{
		OtherError: "other_error", OK: "ok", RateLimited: "rate_limited", QuotaExhausted: "quota_exhausted",
		TooLarge: "too_large", Overloaded: "overloaded", ConcurrencyLimited: "concurrency_limited", Kind(77): "Kind(77)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}
