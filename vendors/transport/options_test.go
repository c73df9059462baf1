package transport_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// A wait that would end past the request's deadline fails at once, with
// the Client's timeout error, and the request is not sent.
func TestDeadlineFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := openAIProfile(t, vendors.OpenAILimits{Model: "gpt-4o", TPM: 1000})
		e := newEnvClock(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{TPM: 1000}}, p, nil)
		oc := openAIClient(e, 0)
		params := openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(900),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}
		if _, err := oc.Chat.Completions.New(testCtx(t), params, option.WithHeader(vendorsim.HeaderOutputTokens, "900")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := oc.Chat.Completions.New(ctx, params)
		if !errors.Is(err, sluice.ErrSlotTimeout) {
			t.Fatalf("error %v, want a slot timeout", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("failed after %v, want at once", waited)
		}
		if st := e.sim.Stats(); st.Requests != 1 {
			t.Errorf("simulator saw %d requests, want 1", st.Requests)
		}
		ev := lastEvent(t, e)
		var ste *sluice.SlotTimeoutError
		if ev.Outcome != transport.Denied || !errors.As(ev.Err, &ste) || ste.RetryIn <= 5*time.Second {
			t.Errorf("event %v %v, want denied with a retry_in past the deadline", ev.Outcome, ev.Err)
		}
	})
}

// The SDKs' middleware option meters as the transport does.
func TestMiddleware(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := gpt4oEnv(t)
		oc := openai.NewClient(option.WithBaseURL("http://"+simHost+"/v1/"), option.WithAPIKey("sk"), option.WithMaxRetries(0),
			option.WithHTTPClient(&http.Client{Transport: pipeRT{e.sim}}), option.WithMiddleware(e.tr.Middleware))
		before := e.balances(t)
		if _, err := oc.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(50),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}, outputSeven); err != nil {
			t.Fatal(err)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": 10, "openai#gpt-4o#rpm": 1})
	})
}

// Unknown endpoints pass through, or take one request with CountRequests;
// a model without a profile is refused.
func TestUnknownEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, policy := range []transport.UnknownPolicy{transport.PassThrough, transport.CountRequests} {
			p := openAIProfile(t, vendors.OpenAILimits{RPM: 600, TPM: 100_000})
			e := newEnv(t, vendorsim.Config{Vendor: vendorsim.OpenAI}, p, transport.WithUnknownEndpoints(policy))
			before := e.balances(t)
			resp, err := e.httpClient().Get("http://" + simHost + "/v1/models")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := int64(0)
			if policy == transport.CountRequests {
				want = 1
			}
			wantDebits(t, before, e.balances(t), map[string]int64{"openai#rpm": want, "openai#tpm": 0})
		}
		// A scoped profile only: another model is refused, not sent, and
		// reported (TestUnmeteredModels covers the other policies).
		e := gpt4oEnv(t)
		before := e.balances(t)
		oc := openAIClient(e, 0)
		if _, err := oc.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}); !errors.Is(err, transport.ErrUnmeteredModel) {
			t.Fatalf("unmetered model: %v, want ErrUnmeteredModel", err)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#rpm": 0, "openai#gpt-4o#tpm": 0})
		if evs := e.eventList(); len(evs) != 1 || evs[0].Outcome != transport.Denied {
			t.Errorf("events %+v for an unmetered model, want one denied", evs)
		}
	})
}

// Azure deployments are recognised from the path; the deployment is the
// profile's scope, and Azure never refunds: tokens stay at the admission
// charge (input + max_tokens) when the usage is lower. The Azure options
// send plain HTTP to a loopback address with a transport of their own, so
// this test meters through the middleware.
func TestAzureDeployment(t *testing.T) {
	p, err := vendors.AzureProfile(vendors.AzureLimits{Deployment: "my-gpt", TPM: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := vendorsim.New(vendorsim.Config{Vendor: vendorsim.Azure, Limits: vendorsim.Limits{TPM: 60_000}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	e := realEnvProfile(t, strings.TrimPrefix(srv.URL, "http://"), p, transport.WithReactorOptions(vendors.WithoutSync()))
	oc := openai.NewClient(azure.WithEndpoint(srv.URL, "2024-10-21"), azure.WithUnsafeAllowHTTP(), azure.WithAPIKey("k"),
		option.WithMiddleware(e.tr.Middleware), option.WithMaxRetries(0))
	before := e.balances(t)
	if _, err := oc.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: "my-gpt", MaxTokens: openai.Int(50),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}, outputSeven); err != nil {
		t.Fatal(err)
	}
	ev := lastEvent(t, e)
	if ev.Model != "my-gpt" || ev.Outcome != transport.Settled {
		t.Fatalf("event %v model %q", ev.Outcome, ev.Model)
	}
	wantDebits(t, before, e.balances(t), map[string]int64{"azure#my-gpt#tpm": ev.Admitted[1].Amount, "azure#my-gpt#rpm": 1})
}

func TestNewErrors(t *testing.T) {
	p := openAIProfile(t, vendors.OpenAILimits{TPM: 1000})
	var fe *sluice.FieldError
	if _, err := transport.New(nil, []vendors.Profile{p}); !errors.As(err, &fe) || fe.Field != "client" {
		t.Errorf("nil client: %v", err)
	}
	e := gpt4oEnv(t)
	if _, err := transport.New(e.client, nil); !errors.Is(err, transport.ErrNoProfile) {
		t.Errorf("no profile: %v", err)
	}
	if _, err := transport.New(e.client, []vendors.Profile{p, p}); !errors.As(err, &fe) || fe.Field != "profiles[openai].scope" {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := transport.New(e.client, []vendors.Profile{p}, transport.WithRoute(transport.Route{Host: "a/b", Vendor: vendors.OpenAI})); !errors.As(err, &fe) || fe.Field != "routes[0].host" {
		t.Errorf("bad host: %v", err)
	}
}

// Through the SDKs' middleware, a refusal that another attempt could not
// change (a slot past the deadline, a model no profile meters) ends the
// SDK's call at once: its retry loop, which retries any error without a
// response, is told not to (x-should-retry: false).
func TestMiddlewareRefusalIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := openAIProfile(t, vendors.OpenAILimits{Model: "gpt-4o", TPM: 1000})
		e := newEnvClock(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{TPM: 1000}}, p, nil)
		oc := openai.NewClient(option.WithBaseURL("http://"+simHost+"/v1/"), option.WithAPIKey("sk"), option.WithMaxRetries(2),
			option.WithHTTPClient(&http.Client{Transport: pipeRT{e.sim}}), option.WithMiddleware(e.tr.Middleware))
		params := openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(900),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}
		if _, err := oc.Chat.Completions.New(testCtx(t), params, option.WithHeader(vendorsim.HeaderOutputTokens, "900")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := oc.Chat.Completions.New(ctx, params); !errors.Is(err, sluice.ErrSlotTimeout) {
			t.Fatalf("error %v, want a slot timeout", err)
		}
		other := params
		other.Model = "gpt-unmetered"
		if _, err := oc.Chat.Completions.New(testCtx(t), other); !errors.Is(err, transport.ErrUnmeteredModel) {
			t.Fatalf("error %v, want ErrUnmeteredModel", err)
		}
		denied := deniedCount(e)
		if denied != 2 {
			t.Errorf("%d denied attempts for two refused calls, want 2 (the SDK retried them)", denied)
		}
	})
}

// The same through the Anthropic SDK's middleware.
func TestAnthropicMiddlewareRefusalIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := anthropicProfile(t, vendors.AnthropicLimits{RPM: 600, InputTPM: 30_000, OutputTPM: 1_000})
		e := newEnvClock(t, vendorsim.Config{Vendor: vendorsim.Anthropic, Limits: vendorsim.Limits{RPM: 600, ITPM: 30_000, OTPM: 1_000}}, p, nil)
		ac := anthropic.NewClient(aoption.WithBaseURL("http://"+simHost), aoption.WithAPIKey("sk-ant"), aoption.WithMaxRetries(2),
			aoption.WithHTTPClient(&http.Client{Transport: pipeRT{e.sim}}), aoption.WithMiddleware(e.tr.Middleware))
		if _, err := ac.Messages.New(testCtx(t), messageParams(900), aoption.WithHeader(vendorsim.HeaderOutputTokens, "900")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := ac.Messages.New(ctx, messageParams(900)); !errors.Is(err, sluice.ErrSlotTimeout) {
			t.Fatalf("error %v, want a slot timeout", err)
		}
		denied := deniedCount(e)
		if denied != 1 {
			t.Errorf("%d denied attempts for one refused call, want 1 (the SDK retried it)", denied)
		}
	})
}

// deniedCount counts e's denied calls.
func deniedCount(e *env) int {
	n := 0
	for _, ev := range e.eventList() {
		if ev.Outcome == transport.Denied {
			n++
		}
	}
	return n
}
