package transport_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

func openAIClient(e *env, retries int) openai.Client {
	return openai.NewClient(option.WithBaseURL("http://"+simHost+"/v1/"), option.WithAPIKey("sk-test"),
		option.WithHTTPClient(e.httpClient()), option.WithMaxRetries(retries))
}

var outputSeven = option.WithHeader(vendorsim.HeaderOutputTokens, "7")

func gpt4oEnv(t *testing.T, opts ...transport.Option) *env {
	p := openAIProfile(t, vendors.OpenAILimits{Model: "gpt-4o", RPM: 600, TPM: 100_000})
	return newEnv(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 600, TPM: 100_000}}, p, opts...)
}

// wantDebits checks that each dimension's balance fell by exactly want
// (whole tokens) between before and after.
func wantDebits(t *testing.T, before, after map[string]int64, want map[string]int64) {
	t.Helper()
	for dim, w := range want {
		if got := before[dim] - after[dim]; got != w {
			t.Errorf("%s: balance fell by %d, want %d (before %d, after %d)", dim, got, w, before[dim], after[dim])
		}
	}
}

func lastEvent(t *testing.T, e *env) transport.Event {
	t.Helper()
	evs := e.eventList()
	if len(evs) == 0 {
		t.Fatal("no event")
	}
	return evs[len(evs)-1]
}

func TestOpenAIChat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := gpt4oEnv(t)
		oc := openAIClient(e, 0)
		before := e.balances(t)
		resp, err := oc.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(50),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}, outputSeven)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Usage.PromptTokens != 3 || resp.Usage.CompletionTokens != 7 {
			t.Fatalf("usage %+v, want 3 + 7", resp.Usage)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": 10, "openai#gpt-4o#rpm": 1})
		ev := lastEvent(t, e)
		if ev.Outcome != transport.Settled || ev.Usage != (vendors.Usage{Input: 3, Output: 7}) || ev.API != transport.ChatCompletions || ev.Model != "gpt-4o" {
			t.Errorf("event %v %v %+v %s, want settled chat gpt-4o usage 3+7", ev.Outcome, ev.API, ev.Usage, ev.Model)
		}
		if got := ev.Admitted[1].Amount; got != 50 {
			t.Errorf("tpm admission = %d, want max(max_tokens 50, estimate)", got)
		}
		if ev.Err != nil {
			t.Errorf("event error: %v", ev.Err)
		}
	})
}

// A stream without include_usage gets it injected: the final chunk's usage
// settles the call, and the SDK's accumulator sees it too.
func TestOpenAIChatStreamInjectsUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := gpt4oEnv(t)
		oc := openAIClient(e, 0)
		before := e.balances(t)
		stream := oc.Chat.Completions.NewStreaming(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}, outputSeven)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if err := stream.Close(); err != nil {
			t.Fatal(err)
		}
		if acc.Usage.PromptTokens != 3 || acc.Usage.CompletionTokens != 7 {
			t.Errorf("accumulated usage %+v, want 3 + 7", acc.Usage)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": 10, "openai#gpt-4o#rpm": 1})
		if ev := lastEvent(t, e); ev.Outcome != transport.Settled || ev.Usage.Output != 7 {
			t.Errorf("event %v usage %+v, want settled with 7 output tokens", ev.Outcome, ev.Usage)
		}
	})
}

// Without injection a stream reports no usage: the call settles from the
// estimate and the streamed text, never below the admission charge.
func TestOpenAIChatStreamWithoutInjection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := gpt4oEnv(t, transport.WithoutUsageInjection())
		oc := openAIClient(e, 0)
		before := e.balances(t)
		stream := oc.Chat.Completions.NewStreaming(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(5),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}, option.WithHeader(vendorsim.HeaderOutputTokens, "40"))
		n := 0
		for stream.Next() {
			n++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		ev := lastEvent(t, e)
		if ev.Outcome != transport.Partial {
			t.Fatalf("outcome %v, want partial", ev.Outcome)
		}
		// Admission max(5, estimate); the streamed text is 5 tokens of 4
		// bytes, the estimate's input is ev.Estimate.InputTokens.
		want := max(ev.Admitted[1].Amount, ev.Estimate.InputTokens+5)
		wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": want, "openai#gpt-4o#rpm": 1})
	})
}

func TestOpenAIResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := gpt4oEnv(t)
		oc := openAIClient(e, 0)
		p := responses.ResponseNewParams{Model: "gpt-4o", MaxOutputTokens: openai.Int(50),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello there")}}
		before := e.balances(t)
		resp, err := oc.Responses.New(testCtx(t), p, outputSeven)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Usage.InputTokens != 3 || resp.Usage.OutputTokens != 7 {
			t.Fatalf("usage %+v", resp.Usage)
		}
		mid := e.balances(t)
		wantDebits(t, before, mid, map[string]int64{"openai#gpt-4o#tpm": 10, "openai#gpt-4o#rpm": 1})

		stream := oc.Responses.NewStreaming(testCtx(t), p, outputSeven)
		for stream.Next() {
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		wantDebits(t, mid, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": 10, "openai#gpt-4o#rpm": 1})
		if ev := lastEvent(t, e); ev.Outcome != transport.Settled || ev.API != transport.Responses || ev.Usage != (vendors.Usage{Input: 3, Output: 7}) {
			t.Errorf("event %v %v %+v, want settled responses 3+7", ev.Outcome, ev.API, ev.Usage)
		}
	})
}

func TestOpenAIEmbeddings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{TPM: 100_000}},
			openAIProfile(t, vendors.OpenAILimits{TPM: 100_000}))
		oc := openAIClient(e, 0)
		before := e.balances(t)
		resp, err := oc.Embeddings.New(testCtx(t), openai.EmbeddingNewParams{Model: openai.EmbeddingModelTextEmbedding3Small,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"abcdefgh", "abc"}}})
		if err != nil {
			t.Fatal(err)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{"openai#tpm": resp.Usage.PromptTokens})
		if ev := lastEvent(t, e); ev.Outcome != transport.Settled || ev.API != transport.Embeddings {
			t.Errorf("event %v %v, want settled embeddings", ev.Outcome, ev.API)
		}
	})
}

// Tool definitions, a tool call and its result are part of the estimate;
// the settlement is the simulator's count.
func TestOpenAIChatTools(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := gpt4oEnv(t)
		oc := openAIClient(e, 0)
		tool := openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather",
			Description: openai.String("Current weather in a city"),
			Parameters:  openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})
		msgs := []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("What is the weather in Paris?"),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_1",
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}}}},
			openai.ToolMessage(`{"temperature_c": 21, "sky": "clear"}`, "call_1"),
		}
		before := e.balances(t)
		resp, err := oc.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs,
			Tools: []openai.ChatCompletionToolUnionParam{tool}}, outputSeven)
		if err != nil {
			t.Fatal(err)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": resp.Usage.PromptTokens + resp.Usage.CompletionTokens})
		ev := lastEvent(t, e)
		noTools, err := transport.EstimateFor(vendors.OpenAI, "/v1/chat/completions", []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"What is the weather in Paris?"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Estimate.InputTokens < noTools.InputTokens+30 {
			t.Errorf("estimate with tools %d, without %d: the tools, call and result must add at least 30", ev.Estimate.InputTokens, noTools.InputTokens)
		}
	})
}

// A 429: the Reactor cools the fleet's dimension, the SDK gets the 429 and
// retries, and the retry acquires again (after the cooldown).
func TestOpenAI429ThenSDKRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Sluice believes in 600 RPM; the vendor enforces 60 (one request
		// at once, then one a second).
		p := openAIProfile(t, vendors.OpenAILimits{Model: "gpt-4o", RPM: 600, TPM: 100_000})
		e := newEnvClock(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 60, TPM: 100_000}}, p, nil)
		oc := openAIClient(e, 2)
		params := openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(20),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}
		if _, err := oc.Chat.Completions.New(testCtx(t), params, outputSeven); err != nil {
			t.Fatal(err)
		}
		acqBefore := e.acquisitions()
		if _, err := oc.Chat.Completions.New(testCtx(t), params, outputSeven); err != nil {
			t.Fatalf("with the SDK's retries: %v", err)
		}
		evs := e.eventList()
		if len(evs) != 3 {
			t.Fatalf("%d events, want 3 (ok, 429, retried ok): %+v", len(evs), evs)
		}
		rej := evs[1]
		if rej.Outcome != transport.Rejected || rej.Status != 429 || !errors.Is(rej.VendorErr, vendors.ErrRateLimited) {
			t.Fatalf("second event %v status %d vendor error %v, want a rejected 429 rate limit", rej.Outcome, rej.Status, rej.VendorErr)
		}
		if rej.Reaction == nil || len(rej.Reaction.Cooled) != 1 || rej.Reaction.Cooled[0] != "openai#gpt-4o#rpm" {
			t.Errorf("reaction %+v, want openai#gpt-4o#rpm cooled", rej.Reaction)
		}
		// The 429 kept its request (OpenAI counts it) and refunded its tokens.
		for _, ch := range rej.Final {
			want := int64(0)
			if ch.Metric == vendors.Requests {
				want = 1
			}
			if ch.Amount != want {
				t.Errorf("after the 429, %s left at %d, want %d", ch.Dimension, ch.Amount, want)
			}
		}
		if evs[2].Outcome != transport.Settled || evs[2].Waited <= 0 {
			t.Errorf("retry: %v after waiting %v, want settled after waiting out the cooldown", evs[2].Outcome, evs[2].Waited)
		}
		if got := e.acquisitions() - acqBefore; got < 2 {
			t.Errorf("%d acquisitions for the call, want one per attempt (at least 2)", got)
		}
		if st := e.sim.Stats(); st.RateLimited != 1 || st.Admitted != 2 {
			t.Errorf("simulator: %d rate limited, %d admitted; want 1 and 2", st.RateLimited, st.Admitted)
		}
	})
}

// A quota 429 is not retryable: it cools nothing down, refunds the tokens,
// and its error is observable in the event.
func TestOpenAIQuotaExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := gpt4oEnv(t)
		e.sim.SetQuotaExhausted(true)
		oc := openAIClient(e, 0)
		before := e.balances(t)
		_, err := oc.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(50),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
			t.Fatalf("error %v, want the vendor's 429", err)
		}
		ev := lastEvent(t, e)
		if ev.Outcome != transport.Rejected || !errors.Is(ev.VendorErr, vendors.ErrQuotaExhausted) || len(ev.Reaction.Cooled) != 0 {
			t.Errorf("event %v %v cooled %v, want rejected, quota exhausted, nothing cooled", ev.Outcome, ev.VendorErr, ev.Reaction.Cooled)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": 0, "openai#gpt-4o#rpm": 1})
	})
}

// The event times the vendor: Latency from sending the request to the
// response's headers, Duration to the end of the call. The simulated
// vendor produces its first token after 300 ms and six more 20 ms apart: a
// whole response comes after 420 ms; a stream's headers come at once and
// its last token after 420 ms.
func TestEventLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := openAIProfile(t, vendors.OpenAILimits{Model: "gpt-4o", RPM: 600, TPM: 100_000})
		e := newEnv(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 600, TPM: 100_000},
			TimeToFirstToken: vendorsim.FixedDuration(300 * time.Millisecond), PerOutputToken: vendorsim.FixedDuration(20 * time.Millisecond)}, p)
		oc := openAIClient(e, 0)
		params := openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(50),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}
		if _, err := oc.Chat.Completions.New(testCtx(t), params, outputSeven); err != nil {
			t.Fatal(err)
		}
		whole := lastEvent(t, e)
		stream := oc.Chat.Completions.NewStreaming(testCtx(t), params, outputSeven)
		for stream.Next() {
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		synctest.Wait()
		streamed := lastEvent(t, e)
		const all = 300*time.Millisecond + 6*20*time.Millisecond
		tests := []struct {
			name              string
			ev                transport.Event
			latency, duration time.Duration
		}{
			{"whole response", whole, all, all},
			{"stream", streamed, 0, all},
		}
		for _, tt := range tests {
			if tt.ev.Outcome != transport.Settled {
				t.Errorf("%s: event %v (%v), want settled", tt.name, tt.ev.Outcome, tt.ev.Err)
			}
			if got, want := tt.ev.Latency, tt.latency; got != want {
				t.Errorf("%s: Latency = %v, want %v", tt.name, got, want)
			}
			if got, want := tt.ev.Duration, tt.duration; got != want {
				t.Errorf("%s: Duration = %v, want %v", tt.name, got, want)
			}
		}
	})
}
