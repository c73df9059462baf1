package vendorsim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ontopix/sluice/vendors/vendorsim"
)

// Point the official OpenAI SDK at a simulator with 60 requests per
// minute: the first call succeeds, the second gets the 429 OpenAI would
// send (one request per second).
func Example_openAI() {
	sim, err := vendorsim.New(vendorsim.Config{
		Vendor:       vendorsim.OpenAI,
		Limits:       vendorsim.Limits{RPM: 60, TPM: 30000},
		OutputTokens: vendorsim.Uniform(20, 200), // drawn per request, up to max_tokens
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()

	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk-dummy"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:     openai.ChatModel("gpt-4o"),
		MaxTokens: openai.Int(100),
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello in five words.")},
	}
	resp, err := client.Chat.Completions.New(context.Background(), params,
		option.WithHeader(vendorsim.HeaderOutputTokens, "12")) // force the length
	if err != nil {
		panic(err)
	}
	fmt.Println("usage:", resp.Usage.PromptTokens, resp.Usage.CompletionTokens)

	_, err = client.Chat.Completions.New(context.Background(), params)
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.Type, apiErr.Response.Header.Get("retry-after"))
	}
	st := sim.Stats()
	fmt.Println("admitted:", st.Admitted, "rate limited:", st.RateLimited)
	// Output:
	// usage: 6 12
	// 429 requests 1
	// admitted: 1 rate limited: 1
}

// Point the official Anthropic SDK at a simulator and read the usage of a
// streamed message, with cache reads set by a header.
func Example_anthropic() {
	sim, err := vendorsim.New(vendorsim.Config{
		Vendor: vendorsim.Anthropic,
		Limits: vendorsim.Limits{RPM: 50, ITPM: 30000, OTPM: 8000},
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()

	client := anthropic.NewClient(aoption.WithBaseURL(srv.URL), aoption.WithAPIKey("sk-ant-dummy"))
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model:     anthropic.Model("claude-sonnet-4-5"),
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Summarise the plot of Hamlet."))},
	}, aoption.WithHeader(vendorsim.HeaderOutputTokens, "40"), aoption.WithHeader(vendorsim.HeaderCacheReadTokens, "5"))
	var msg anthropic.Message
	for stream.Next() {
		_ = msg.Accumulate(stream.Current())
	}
	if err := stream.Err(); err != nil {
		panic(err)
	}
	fmt.Println("input:", msg.Usage.InputTokens, "cache read:", msg.Usage.CacheReadInputTokens, "output:", msg.Usage.OutputTokens)
	in, _ := sim.Stats().Metric(vendorsim.MetricInputTokens)
	out, _ := sim.Stats().Metric(vendorsim.MetricOutputTokens)
	fmt.Println("ITPM counted:", in.Counted, "OTPM counted:", out.Counted)
	// Output:
	// input: 3 cache read: 5 output: 40
	// ITPM counted: 3 OTPM counted: 40
}

// InputTokens tells a benchmark the input count the simulator will report.
func ExampleInputTokens() {
	n, err := vendorsim.InputTokens(vendorsim.PathMessages,
		[]byte(`{"model":"m","max_tokens":10,"system":"Be brief.","messages":[{"role":"user","content":"Hello!"}]}`))
	fmt.Println(n, err) // ceil((9 + 6) / 4)
	// Output: 4 <nil>
}
