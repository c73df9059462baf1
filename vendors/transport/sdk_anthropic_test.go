package transport_test

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

func anthropicClient(e *env, retries int) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL("http://"+simHost), aoption.WithAPIKey("sk-ant-test"),
		aoption.WithHTTPClient(e.httpClient()), aoption.WithMaxRetries(retries))
}

func messageParams(maxTokens int64) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: maxTokens,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello there"))}}
}

var aSeven = aoption.WithHeader(vendorsim.HeaderOutputTokens, "7")

const (
	aRPM = "anthropic#rpm"
	aIn  = "anthropic#input_tpm"
	aOut = "anthropic#output_tpm"
)

// claudeEnv is an Anthropic env whose Reactor does not sync balances:
// Anthropic rounds token remainders to the nearest thousand, and the sync
// to the least value consistent with that (remaining − 500) would blur
// the exact balances the tests assert. TestAnthropicSync covers it.
func claudeEnv(t *testing.T, opts ...transport.Option) *env {
	p := anthropicProfile(t, vendors.AnthropicLimits{RPM: 600, InputTPM: 30_000, OutputTPM: 8_000})
	opts = append([]transport.Option{transport.WithReactorOptions(vendors.WithoutSync())}, opts...)
	return newEnv(t, vendorsim.Config{Vendor: vendorsim.Anthropic, Limits: vendorsim.Limits{RPM: 600, ITPM: 30_000, OTPM: 8_000}}, p, opts...)
}

// Every response's headers sync the balances down to what the vendor
// reports: Anthropic's output tokens remaining, 8000 rounded to the
// thousand, is at least 7500, below the profile's 7840 − 50 admitted.
func TestAnthropicSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := anthropicProfile(t, vendors.AnthropicLimits{RPM: 600, InputTPM: 30_000, OutputTPM: 8_000})
		e := newEnv(t, vendorsim.Config{Vendor: vendorsim.Anthropic, Limits: vendorsim.Limits{RPM: 600, ITPM: 30_000, OTPM: 8_000}}, p)
		ac := anthropicClient(e, 0)
		if _, err := ac.Messages.New(testCtx(t), messageParams(50), aSeven); err != nil {
			t.Fatal(err)
		}
		ev := lastEvent(t, e)
		if ev.Reaction == nil || len(ev.Reaction.Synced) != 3 {
			t.Fatalf("reaction %+v, want the three dimensions synced", ev.Reaction)
		}
		// Synced to 7500 with 50 held, then settled to 7: 43 refunded.
		if got := e.balances(t)[aOut]; got != 7500+43 {
			t.Errorf("output tokens balance %d, want 7543", got)
		}
	})
}

// Messages, not streamed: input tokens settle to input + cache writes
// (cache reads excluded), output tokens to the output.
func TestAnthropicMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := claudeEnv(t)
		ac := anthropicClient(e, 0)
		before := e.balances(t)
		msg, err := ac.Messages.New(testCtx(t), messageParams(50), aSeven, aoption.WithHeader(vendorsim.HeaderCacheReadTokens, "1"))
		if err != nil {
			t.Fatal(err)
		}
		if msg.Usage.InputTokens != 2 || msg.Usage.CacheReadInputTokens != 1 || msg.Usage.OutputTokens != 7 {
			t.Fatalf("usage %+v", msg.Usage)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{aRPM: 1, aIn: 2, aOut: 7})
		ev := lastEvent(t, e)
		if ev.Outcome != transport.Settled || ev.Usage != (vendors.Usage{Input: 2, Output: 7, CacheRead: 1}) {
			t.Errorf("event %v %+v, want settled 2 in, 1 cache read, 7 out", ev.Outcome, ev.Usage)
		}
		if got := ev.Admitted[2].Amount; got != 50 {
			t.Errorf("output admission %d, want min(max_tokens 50, 1024)", got)
		}
	})
}

// Streamed: message_start's input usage and message_delta's output usage.
func TestAnthropicMessagesStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := claudeEnv(t)
		ac := anthropicClient(e, 0)
		before := e.balances(t)
		stream := ac.Messages.NewStreaming(testCtx(t), messageParams(50), aSeven, aoption.WithHeader(vendorsim.HeaderCacheCreationTokens, "1"))
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		// input_tokens 2 + cache_creation 1.
		wantDebits(t, before, e.balances(t), map[string]int64{aRPM: 1, aIn: 3, aOut: 7})
		if ev := lastEvent(t, e); ev.Outcome != transport.Settled || ev.Usage != (vendors.Usage{Input: 2, Output: 7, CacheCreation: 1}) {
			t.Errorf("event %v %+v", ev.Outcome, ev.Usage)
		}
	})
}

// Tool definitions, a tool_use block and its tool_result count in the
// estimate; the settlement is the simulator's count.
func TestAnthropicToolUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := claudeEnv(t)
		ac := anthropicClient(e, 0)
		p := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 100,
			Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("Current weather in a city"),
				InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}},
			Messages: []anthropic.MessageParam{
				anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?")),
				anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{"city": "Paris"}, "get_weather")),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", `{"temperature_c": 21, "sky": "clear"}`, false)),
			}}
		before := e.balances(t)
		msg, err := ac.Messages.New(testCtx(t), p, aSeven)
		if err != nil {
			t.Fatal(err)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{aIn: msg.Usage.InputTokens, aOut: 7})
		ev := lastEvent(t, e)
		if ev.Estimate.InputTokens < 60 {
			t.Errorf("estimate %d input tokens: the tool definition, call and result must count", ev.Estimate.InputTokens)
		}
	})
}

// A 429 from Anthropic consumes nothing: everything is refunded, the
// Reactor cools the fleet down, and the SDK's retry acquires again.
func TestAnthropic429ThenSDKRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := anthropicProfile(t, vendors.AnthropicLimits{RPM: 600, InputTPM: 30_000, OutputTPM: 8_000})
		e := newEnvClock(t, vendorsim.Config{Vendor: vendorsim.Anthropic, Limits: vendorsim.Limits{RPM: 60, ITPM: 30_000, OTPM: 8_000}}, p, nil)
		ac := anthropicClient(e, 2)
		if _, err := ac.Messages.New(testCtx(t), messageParams(50), aSeven); err != nil {
			t.Fatal(err)
		}
		if _, err := ac.Messages.New(testCtx(t), messageParams(50), aSeven); err != nil {
			t.Fatalf("with the SDK's retries: %v", err)
		}
		evs := e.eventList()
		if len(evs) != 3 {
			t.Fatalf("%d events, want 3", len(evs))
		}
		rej := evs[1]
		if rej.Outcome != transport.Rejected || !errors.Is(rej.VendorErr, vendors.ErrRateLimited) || rej.Reaction == nil || len(rej.Reaction.Cooled) == 0 {
			t.Fatalf("second event %v %v %+v, want a rejected rate limit that cooled something", rej.Outcome, rej.VendorErr, rej.Reaction)
		}
		for _, ch := range rej.Final {
			if ch.Amount != 0 {
				t.Errorf("after Anthropic's 429, %s left at %d, want 0 (a 429 consumes nothing)", ch.Dimension, ch.Amount)
			}
		}
		if evs[2].Outcome != transport.Settled || evs[2].Attempts < 1 {
			t.Errorf("retry %v, want settled", evs[2].Outcome)
		}
	})
}
