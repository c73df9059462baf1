package vendorsim_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/ontopix/sluice/vendors/vendorsim"
)

func newAnthropic(t *testing.T, cfg vendorsim.Config, retries int) (anthropic.Client, *vendorsim.Sim) {
	t.Helper()
	sim, err := vendorsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return anthropic.NewClient(aoption.WithBaseURL(srv.URL), aoption.WithAPIKey("sk-ant-test"),
		aoption.WithMaxRetries(retries), aoption.WithRequestTimeout(30*time.Second)), sim
}

func messageParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: anthropic.Model("claude-sonnet-4-5"), MaxTokens: 50,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello there"))}} // 3 tokens
}

var aSeven = aoption.WithHeader(vendorsim.HeaderOutputTokens, "7")

func TestAnthropicSDKMessages(t *testing.T) {
	c, sim := newAnthropic(t, vendorsim.Config{Vendor: vendorsim.Anthropic, Limits: vendorsim.Limits{RPM: 600, ITPM: 10000, OTPM: 10000}}, 0)
	msg, err := c.Messages.New(ctx(t), messageParams(), aSeven, aoption.WithHeader(vendorsim.HeaderCacheReadTokens, "1"))
	if err != nil {
		t.Fatal(err)
	}
	u := msg.Usage
	if u.InputTokens != 2 || u.CacheReadInputTokens != 1 || u.CacheCreationInputTokens != 0 || u.OutputTokens != 7 {
		t.Errorf("usage = %+v, want 2 input, 1 cache read, 7 output", u)
	}
	if len(msg.Content) != 1 || len(msg.Content[0].Text) != 28 || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("content %+v, stop %q", msg.Content, msg.StopReason)
	}
	st := sim.Stats()
	if in, _ := st.Metric(vendorsim.MetricInputTokens); in.Counted != 2 {
		t.Errorf("ITPM counted %d, want 2 (the cache read excluded)", in.Counted)
	}
}

func TestAnthropicSDKStreamUsage(t *testing.T) {
	c, sim := newAnthropic(t, vendorsim.Config{Vendor: vendorsim.Anthropic, Limits: vendorsim.Limits{OTPM: 10000}, StreamChunkTokens: 3}, 0)
	p := messageParams()
	p.MaxTokens = 5
	stream := c.Messages.NewStreaming(ctx(t), p, aSeven)
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// max_tokens 5 cuts the forced 7.
	if msg.Usage.InputTokens != 3 || msg.Usage.OutputTokens != 5 || msg.StopReason != anthropic.StopReasonMaxTokens {
		t.Errorf("usage %+v, stop %q; want 3 in, 5 out, max_tokens", msg.Usage, msg.StopReason)
	}
	if len(msg.Content) != 1 || len(msg.Content[0].Text) != 20 {
		t.Errorf("content = %+v, want 20 bytes of text", msg.Content)
	}
	if out, _ := sim.Stats().Metric(vendorsim.MetricOutputTokens); out.Counted != 5 {
		t.Errorf("OTPM counted %d, want 5", out.Counted)
	}
}

func TestAnthropicSDKRateLimited(t *testing.T) {
	c, _ := newAnthropic(t, vendorsim.Config{Vendor: vendorsim.Anthropic, Limits: vendorsim.Limits{RPM: 60}}, 0)
	if _, err := c.Messages.New(ctx(t), messageParams()); err != nil {
		t.Fatal(err)
	}
	_, err := c.Messages.New(ctx(t), messageParams())
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want *anthropic.Error", err)
	}
	if apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type() != "rate_limit_error" {
		t.Errorf("status %d type %q, want 429 rate_limit_error", apiErr.StatusCode, apiErr.Type())
	}
	if got := apiErr.Response.Header.Get("Retry-After"); got != "1" {
		t.Errorf("retry-after = %q, want 1", got)
	}
}

// With retries allowed, the SDK waits out retry-after (1 s here) and
// succeeds once the bucket has refilled.
func TestAnthropicSDKRetriesAfterRetryAfter(t *testing.T) {
	c, sim := newAnthropic(t, vendorsim.Config{Vendor: vendorsim.Anthropic, Limits: vendorsim.Limits{RPM: 60}}, 0)
	if _, err := c.Messages.New(ctx(t), messageParams()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Messages.New(ctx(t), messageParams(), aoption.WithMaxRetries(3)); err != nil {
		t.Fatalf("with retries: %v", err)
	}
	if st := sim.Stats(); st.Admitted != 2 || st.RateLimited < 1 {
		t.Errorf("Admitted %d RateLimited %d, want 2 and at least 1", st.Admitted, st.RateLimited)
	}
}
