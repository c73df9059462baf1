package vendorsim

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// RPM 120 is a bucket of 2 requests refilled at 2 per second: two at once,
// the third after exactly 500 ms, and a 429 in between takes the partial
// refill away (OpenAI counts unsuccessful requests).
func TestOpenAIRPMSubSecondBucket(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: OpenAI, Limits: Limits{RPM: 120}})
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusOK)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusOK)
	w := post(t, s, PathChatCompletions, chatBody(1, 10))
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeader(t, w, "Retry-After-Ms", "500")
	wantHeader(t, w, "Retry-After", "1")

	clk.Add(500*time.Millisecond - time.Nanosecond)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusTooManyRequests)
	// That 429 emptied the 0.999… request the bucket had earned.
	clk.Add(time.Nanosecond)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusTooManyRequests)
	clk.Add(500 * time.Millisecond)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusOK)

	ms := metricStats(t, s, MetricRequests)
	// 3 admitted; the first 429 found the bucket empty (nothing taken), the
	// other two took only fractions (dropped, not counted).
	if ms.Counted != 3 || ms.Denied != 3 {
		t.Errorf("requests counted %d denied %d, want 3 and 3", ms.Counted, ms.Denied)
	}
}

// A 429 for tokens still takes a request from RPM.
func TestOpenAIRejectedRequestCountsAgainstRPM(t *testing.T) {
	s, _ := newSim(t, Config{Vendor: OpenAI, Limits: Limits{RPM: 600, TPM: 100}})
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 100)), http.StatusOK)
	w := post(t, s, PathChatCompletions, chatBody(1, 100))
	wantStatus(t, w, http.StatusTooManyRequests)
	// 10 − 1 admitted − 1 rejected = 8 of the 10-request bucket: 598 of 600.
	wantHeader(t, w, "X-Ratelimit-Remaining-Requests", "598")
	if got := metricStats(t, s, MetricRequests).Counted; got != 2 {
		t.Errorf("requests counted = %d, want 2", got)
	}
}

// TPM charges max(max_tokens, input estimate) at admission and settles to
// prompt + completion tokens when the response completes.
func TestOpenAITPMChargeAndSettle(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: OpenAI, Limits: Limits{TPM: 1000}})
	w := post(t, s, PathChatCompletions, chatBody(10, 600), HeaderOutputTokens, "50")
	wantStatus(t, w, http.StatusOK)
	// The headers are written at admission: 1000 − 600.
	wantHeader(t, w, "X-Ratelimit-Remaining-Tokens", "400")
	// Settled to 10 + 50 = 60: 940 left, no time passed.
	if got := metricStats(t, s, MetricTokens); got.Counted != 60 || got.Remaining != 940 {
		t.Fatalf("after settlement counted %d remaining %d, want 60 and 940", got.Counted, got.Remaining)
	}
	w = post(t, s, PathChatCompletions, chatBody(10, 941))
	wantStatus(t, w, http.StatusTooManyRequests)
	var body struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	// 1 token short at 1000 per minute: 60 ms.
	want := "Rate limit reached for gpt-4o in organization org-sim on tokens per min (TPM): Limit 1000, Used 60, Requested 941. " +
		"Please try again in 60ms. Visit https://platform.openai.com/account/rate-limits to learn more."
	if body.Error.Message != want || body.Error.Type != "tokens" || body.Error.Code != "rate_limit_exceeded" {
		t.Errorf("429 body = %+v, want message %q, type tokens, code rate_limit_exceeded", body.Error, want)
	}
	wantHeader(t, w, "Retry-After-Ms", "60")
	clk.Add(60*time.Millisecond - time.Nanosecond)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(10, 941)), http.StatusTooManyRequests)
	clk.Add(time.Nanosecond)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(10, 941), HeaderOutputTokens, "1"), http.StatusOK)

	// The estimate wins when it is above max_tokens: 100 tokens of prompt,
	// max_tokens 5 → 100 charged, from 1000 − 60 + 1 (60 ms) − 11 = 930.
	w = post(t, s, PathChatCompletions, chatBody(100, 5), HeaderOutputTokens, "5")
	wantStatus(t, w, http.StatusOK)
	wantHeader(t, w, "X-Ratelimit-Remaining-Tokens", "830")
}

// A request whose charge exceeds TPM is "Request too large", without
// retry-after.
func TestOpenAIRequestTooLarge(t *testing.T) {
	s, _ := newSim(t, Config{Vendor: OpenAI, Limits: Limits{RPM: 60, TPM: 1000}})
	w := post(t, s, PathChatCompletions, chatBody(1, 1001))
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeader(t, w, "Retry-After", "")
	var body struct {
		Error struct{ Message, Type, Code string }
	}
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	want := "Request too large for gpt-4o in organization org-sim on tokens per min (TPM): Limit 1000, Requested 1001. " +
		"The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more."
	if body.Error.Message != want {
		t.Errorf("message = %q, want %q", body.Error.Message, want)
	}
	st := s.Stats()
	if st.TooLarge != 1 || st.RateLimited != 0 {
		t.Errorf("TooLarge %d RateLimited %d, want 1 and 0", st.TooLarge, st.RateLimited)
	}
	// It still took the one request RPM 60 holds.
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusTooManyRequests)
}

func TestOpenAIHeaders(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: OpenAI, Limits: Limits{RPM: 600, TPM: 60000}})
	w := post(t, s, PathChatCompletions, chatBody(10, 1000), HeaderOutputTokens, "20")
	for name, want := range map[string]string{
		"X-Ratelimit-Limit-Requests":     "600",
		"X-Ratelimit-Remaining-Requests": "599",
		"X-Ratelimit-Reset-Requests":     "100ms",
		"X-Ratelimit-Limit-Tokens":       "60000",
		"X-Ratelimit-Remaining-Tokens":   "59000",
		"X-Ratelimit-Reset-Tokens":       "1s",
	} {
		wantHeader(t, w, name, want)
	}
	// After settlement 30 tokens are missing: 30 ms; after 10 ms, 20 ms.
	clk.Add(10 * time.Millisecond)
	// 59980 tokens left: charging them all empties the bucket, 60 s to full.
	w = post(t, s, PathChatCompletions, chatBody(1, 59980), HeaderOutputTokens, "1")
	wantStatus(t, w, http.StatusOK)
	wantHeader(t, w, "X-Ratelimit-Remaining-Tokens", "0")
	wantHeader(t, w, "X-Ratelimit-Reset-Tokens", "1m0s")
	// 10 − 1 + 0.1 − 1 = 8.1 requests: 1.9 missing, 598 of 600, 190 ms.
	wantHeader(t, w, "X-Ratelimit-Remaining-Requests", "598")
	wantHeader(t, w, "X-Ratelimit-Reset-Requests", "190ms")
}

func TestOpenAIDailyLimits(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: OpenAI, Limits: Limits{RPD: 2}})
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusOK)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusOK)
	w := post(t, s, PathChatCompletions, chatBody(1, 10))
	wantStatus(t, w, http.StatusTooManyRequests)
	// 2 per day: one every 12 h.
	wantHeader(t, w, "Retry-After", "43200")
	clk.Add(12 * time.Hour)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusOK)
}

// ScaleLimits lowers every limit for a period; the headers show it.
func TestScaleLimits(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: OpenAI, Limits: Limits{RPM: 600, TPM: 10000}})
	if err := s.ScaleLimits(0.5, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		w := post(t, s, PathChatCompletions, chatBody(1, 10), HeaderOutputTokens, "1")
		wantStatus(t, w, http.StatusOK)
		if i == 0 {
			wantHeader(t, w, "X-Ratelimit-Limit-Requests", "300")
			wantHeader(t, w, "X-Ratelimit-Limit-Tokens", "5000")
		}
	}
	// The bucket holds 5 at RPM 300.
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusTooManyRequests)
	clk.Add(30 * time.Second)
	w := post(t, s, PathChatCompletions, chatBody(1, 10))
	wantStatus(t, w, http.StatusOK)
	wantHeader(t, w, "X-Ratelimit-Limit-Requests", "600")
	// The allowance: the initial 10, then 30 s at 300/min.
	if got := metricStats(t, s, MetricRequests).Allowance; got != 160 {
		t.Errorf("allowance = %d, want 160", got)
	}
	if err := s.ScaleLimits(0, time.Second); err == nil {
		t.Error("ScaleLimits(0, 1s) succeeded, want an error")
	}
}

func TestScheduleInConfig(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: Anthropic, Limits: Limits{RPM: 60, ITPM: 10000, OTPM: 2000},
		Schedule: []Scale{{At: 10 * time.Second, For: 10 * time.Second, Factor: 0.25}}})
	wantHeader(t, post(t, s, PathMessages, messagesBody(1, 10)), "Anthropic-Ratelimit-Input-Tokens-Limit", "10000")
	clk.Add(10 * time.Second)
	w := post(t, s, PathMessages, messagesBody(1, 10))
	wantHeader(t, w, "Anthropic-Ratelimit-Input-Tokens-Limit", "2500")
	wantHeader(t, w, "Anthropic-Ratelimit-Output-Tokens-Limit", "500")
	wantHeader(t, w, "Anthropic-Ratelimit-Requests-Limit", "15")
	clk.Add(10 * time.Second)
	wantHeader(t, post(t, s, PathMessages, messagesBody(1, 10)), "Anthropic-Ratelimit-Input-Tokens-Limit", "10000")
}

func TestQuotaAndOverload(t *testing.T) {
	s, _ := newSim(t, Config{Vendor: OpenAI, Limits: Limits{RPM: 60}, QuotaExhausted: true})
	w := post(t, s, PathChatCompletions, chatBody(1, 10))
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeader(t, w, "Retry-After", "")
	var body struct{ Error struct{ Type, Code string } }
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	if body.Error.Type != "insufficient_quota" || body.Error.Code != "insufficient_quota" {
		t.Errorf("quota body = %s", w.Body.String())
	}
	s.SetQuotaExhausted(false)
	wantStatus(t, post(t, s, PathChatCompletions, chatBody(1, 10)), http.StatusOK)

	o, _ := newSim(t, Config{Vendor: Anthropic, ErrorRate: 1})
	w = post(t, o, PathMessages, messagesBody(1, 10))
	wantStatus(t, w, 529)
	if got, want := w.Body.String(), `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`; got != want {
		t.Errorf("529 body = %s, want %s", got, want)
	}
	if st := o.Stats(); st.Overloaded != 1 || st.Admitted != 0 {
		t.Errorf("Overloaded %d Admitted %d, want 1 and 0", st.Overloaded, st.Admitted)
	}
}
