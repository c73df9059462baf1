package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// An OpenAI SDK client whose calls are metered: here against the vendor
// simulator, routed as a custom base URL.
func Example() {
	sim, _ := vendorsim.New(vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 500, TPM: 30_000}})
	srv := httptest.NewServer(sim)
	defer srv.Close()

	ctx := context.Background()
	client, _ := sluice.New(memstore.New())
	profile, _ := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 500, TPM: 30_000})
	for _, b := range profile.Buckets() {
		_ = client.PutBucket(ctx, b)
	}
	t, err := transport.New(client, []vendors.Profile{profile},
		transport.WithRoute(transport.Route{Host: strings.TrimPrefix(srv.URL, "http://"), Vendor: vendors.OpenAI}),
		transport.WithEvents(func(_ context.Context, ev transport.Event) {
			fmt.Println(ev.Outcome, "admitted", ev.Admitted[1].Amount, "tokens, settled to", ev.Final[1].Amount)
		}))
	if err != nil {
		panic(err)
	}
	oc := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk-test"),
		option.WithHTTPClient(&http.Client{Transport: t}))

	resp, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(100),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello in five words.")}},
		option.WithHeader(vendorsim.HeaderOutputTokens, "12"))
	if err != nil {
		panic(err)
	}
	fmt.Println("usage:", resp.Usage.PromptTokens, "+", resp.Usage.CompletionTokens)
	// OpenAI's tokens are read as keeping the admission charge
	// (vendors.AdmissionKept): the call used 18 tokens, and its 100 stay
	// charged. vendors.WithCostReading(vendors.AdjustedToUsage) would
	// settle it to 18.

	// Output:
	// settled admitted 100 tokens, settled to 100
	// usage: 6 + 12
}

// The estimate of a request body, as a calibration tool would compute it.
func ExampleEstimateFor() {
	e, err := transport.EstimateFor(vendors.OpenAI, "/v1/chat/completions",
		[]byte(`{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(e)
	fmt.Println(e.Call(0))
	// Output:
	// chat.completions gpt-4o: 8 input tokens (exact), 11 characters, max 100 × 1, 0 images
	// {8 11 100 0 1}
}

// A request without a deadline waits at most the Client's
// DefaultSlotTimeout for its slot.
// Here the bucket is empty and the tokens come back in 10 s: the call
// fails at once, reserving nothing, and is never sent.
func ExampleTransport_RoundTrip_defaultSlotTimeout() {
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg := sluice.DefaultConfig()
	cfg.DefaultSlotTimeout = 5 * time.Second
	client, _ := sluice.New(memstore.New(), sluice.WithConfig(cfg), sluice.WithClock(sluice.ClockFunc(func() time.Time { return at })))
	profile, _ := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", TPM: 6000}, vendors.WithHeadroom(0))
	for _, b := range profile.Buckets() {
		_ = client.PutBucket(ctx, b)
	}
	_, _ = client.Acquire(ctx, "openai#gpt-4o#tpm", sluice.WithCost(6000)) // another replica took it all
	never := transport.WithBase(roundTripFunc(func(*http.Request) (*http.Response, error) {
		panic("the request is not sent")
	}))
	t, _ := transport.New(client, []vendors.Profile{profile}, never)

	req, _ := http.NewRequest(http.MethodPost, "https://api.openai.com/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","max_tokens":1000,"messages":[{"role":"user","content":"hello"}]}`))
	_, err := t.RoundTrip(req)
	var te *sluice.SlotTimeoutError
	if errors.As(err, &te) {
		fmt.Println("no slot within", te.Timeout, "- the wait is", te.RetryIn)
	}
	// Output:
	// no slot within 5s - the wait is 10s
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
