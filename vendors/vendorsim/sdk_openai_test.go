package vendorsim_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/ontopix/sluice/vendors/vendorsim"
)

// newOpenAI starts a simulator and returns an official SDK client for it,
// with the given number of retries.
func newOpenAI(t *testing.T, cfg vendorsim.Config, retries int) (openai.Client, *vendorsim.Sim) {
	t.Helper()
	sim, err := vendorsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk-test"),
		option.WithMaxRetries(retries), option.WithRequestTimeout(30*time.Second)), sim
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

var seven = option.WithHeader(vendorsim.HeaderOutputTokens, "7")

func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: openai.ChatModel("gpt-4o"), MaxTokens: openai.Int(50),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}} // 11 bytes: 3 tokens
}

func TestOpenAISDKChat(t *testing.T) {
	c, _ := newOpenAI(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 600, TPM: 100000}}, 0)
	resp, err := c.Chat.Completions.New(ctx(t), chatParams(), seven)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resp.Usage, (openai.CompletionUsage{PromptTokens: 3, CompletionTokens: 7, TotalTokens: 10}); got.PromptTokens != want.PromptTokens ||
		got.CompletionTokens != want.CompletionTokens || got.TotalTokens != want.TotalTokens {
		t.Errorf("usage = %+v, want %+v", got, want)
	}
	if got := resp.Choices[0].Message.Content; len(got) != 28 || resp.Choices[0].FinishReason != "stop" {
		t.Errorf("content %q (%d bytes), finish %q; want 28 bytes, stop", got, len(got), resp.Choices[0].FinishReason)
	}
}

func TestOpenAISDKChatStreamUsage(t *testing.T) {
	c, sim := newOpenAI(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{TPM: 100000}, StreamChunkTokens: 2}, 0)
	p := chatParams()
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx(t), p, seven)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Usage.PromptTokens != 3 || acc.Usage.CompletionTokens != 7 {
		t.Errorf("accumulated usage = %+v, want 3 prompt and 7 completion tokens", acc.Usage)
	}
	if got := acc.Choices[0].Message.Content; len(got) != 28 {
		t.Errorf("accumulated content %q, want 28 bytes", got)
	}
	// Settled: 3 + 7 counted against TPM.
	if ms, _ := sim.Stats().Metric(vendorsim.MetricTokens); ms.Counted != 10 {
		t.Errorf("tokens counted = %d, want 10", ms.Counted)
	}
}

func TestOpenAISDKResponses(t *testing.T) {
	c, _ := newOpenAI(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{TPM: 100000}}, 0)
	p := responses.ResponseNewParams{Model: openai.ChatModel("gpt-4o"), MaxOutputTokens: openai.Int(50),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello there")}}
	resp, err := c.Responses.New(ctx(t), p, seven)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.InputTokens != 3 || resp.Usage.OutputTokens != 7 || len(resp.OutputText()) != 28 {
		t.Errorf("usage %+v, text %q; want 3 in, 7 out, 28 bytes", resp.Usage, resp.OutputText())
	}

	stream := c.Responses.NewStreaming(ctx(t), p, seven)
	var text string
	var usage *responses.ResponseUsage
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			u := ev.Response.Usage
			usage = &u
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if usage == nil || usage.InputTokens != 3 || usage.OutputTokens != 7 || len(text) != 28 {
		t.Errorf("stream usage %+v, text %q; want 3 in, 7 out, 28 bytes", usage, text)
	}
}

func TestOpenAISDKEmbeddings(t *testing.T) {
	c, _ := newOpenAI(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{TPM: 100000}}, 0)
	resp, err := c.Embeddings.New(ctx(t), openai.EmbeddingNewParams{Model: openai.EmbeddingModelTextEmbedding3Small,
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"abcdefgh", "abc"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.PromptTokens != 3 || len(resp.Data) != 2 || len(resp.Data[1].Embedding) != 8 {
		t.Errorf("usage %+v, %d embeddings; want 3 tokens, 2 embeddings of 8", resp.Usage, len(resp.Data))
	}
}

func TestOpenAISDKRateLimited(t *testing.T) {
	c, _ := newOpenAI(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 60, TPM: 100000}}, 0)
	if _, err := c.Chat.Completions.New(ctx(t), chatParams()); err != nil {
		t.Fatal(err)
	}
	_, err := c.Chat.Completions.New(ctx(t), chatParams())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want *openai.Error", err)
	}
	if apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type != "requests" || apiErr.Code != "rate_limit_exceeded" {
		t.Errorf("error status %d type %q code %q; want 429 requests rate_limit_exceeded", apiErr.StatusCode, apiErr.Type, apiErr.Code)
	}
	if apiErr.Response.Header.Get("Retry-After-Ms") == "" || apiErr.Response.Header.Get("X-Ratelimit-Limit-Requests") != "60" {
		t.Errorf("429 headers = %v", apiErr.Response.Header)
	}
}

// With retries allowed, the SDK waits out retry-after-ms and succeeds once
// the bucket has refilled.
func TestOpenAISDKRetriesAfterRetryAfter(t *testing.T) {
	cfg := vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 600, TPM: 1000000}} // 10 at once, then one per 100 ms
	c, sim := newOpenAI(t, cfg, 0)
	for i := 0; ; i++ {
		if _, err := c.Chat.Completions.New(ctx(t), chatParams()); err != nil {
			break // the bucket is empty
		}
		if i > 1000 {
			t.Fatal("never rate limited")
		}
	}
	if _, err := c.Chat.Completions.New(ctx(t), chatParams(), option.WithMaxRetries(3)); err != nil {
		t.Fatalf("with retries: %v", err)
	}
	if st := sim.Stats(); st.RateLimited < 1 {
		t.Errorf("RateLimited = %d, want at least 1", st.RateLimited)
	}
}

// The SDK's Azure options call /openai/deployments/MODEL/chat/completions;
// the Azure rule admits one request per calendar second at RPM 36.
func TestOpenAISDKAzure(t *testing.T) {
	sim, err := vendorsim.New(vendorsim.Config{Vendor: vendorsim.Azure, Limits: vendorsim.Limits{TPM: 6000}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	c := openai.NewClient(azure.WithEndpoint(srv.URL, "2024-10-21"), azure.WithUnsafeAllowHTTP(), azure.WithAPIKey("azure-key"),
		option.WithMaxRetries(0), option.WithRequestTimeout(30*time.Second))
	p := chatParams()
	p.Model = "my-deployment"
	resp, err := c.Chat.Completions.New(ctx(t), p, seven)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "my-deployment" || resp.Usage.CompletionTokens != 7 {
		t.Errorf("model %q, usage %+v; want my-deployment, 7 completion tokens", resp.Model, resp.Usage)
	}
	// Input 3 + max_tokens 50, never refunded.
	if ms, _ := sim.Stats().Metric(vendorsim.MetricTokens); ms.Counted != 53 {
		t.Errorf("tokens counted = %d, want 53", ms.Counted)
	}
}
