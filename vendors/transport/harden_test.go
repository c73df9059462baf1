package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// Every spelling of a vendor's own host is metered: case, a trailing dot
// and the scheme's default port. The requests are served in-process by
// the simulator (pipeRT): nothing leaves the machine.
func TestVendorHostSpellingsAreMetered(t *testing.T) {
	for _, base := range []string{
		"https://api.openai.com/v1/",
		"https://api.openai.com:443/v1/",
		"https://api.openai.com.:443/v1/",
		"https://API.OpenAI.com./v1/",
		"http://api.openai.com:80/v1/",
		"https://eu.api.openai.com/v1/", // data residency in Europe
		"https://US.api.openai.com.:443/v1/",
	} {
		t.Run(base, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := gpt4oEnv(t)
				oc := openai.NewClient(option.WithBaseURL(base), option.WithAPIKey("sk-test"),
					option.WithHTTPClient(e.httpClient()), option.WithMaxRetries(0))
				before := e.balances(t)
				if _, err := oc.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(50),
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}, outputSeven); err != nil {
					t.Fatal(err)
				}
				wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": 10, "openai#gpt-4o#rpm": 1})
				if ev := lastEvent(t, e); ev.Outcome != transport.Settled {
					t.Errorf("outcome %v, want settled", ev.Outcome)
				}
			})
		})
	}
}

// A host that is not a vendor's passes through unchanged and unreported,
// whatever its spelling.
func TestOtherHostsPassUnreported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := gpt4oEnv(t)
		for _, u := range []string{"http://example.test/v1/chat/completions", "https://api.openai.com.evil.test:443/v1/chat/completions"} {
			resp, err := e.httpClient().Post(u, "application/json", strings.NewReader(`{"model":"gpt-4o","messages":[]}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if n := len(e.eventList()); n != 0 {
			t.Errorf("%d events for non-vendor hosts, want 0", n)
		}
		if s := e.tr.Stats(); s != (transport.Stats{}) {
			t.Errorf("stats %+v, want zero", s)
		}
	})
}

func TestResolveModel(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"gpt-4o-2024-08-06", "gpt-4o"},
		{"gpt-4o", "gpt-4o"},
		{"gpt-4o-mini", "gpt-4o-mini"},
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini"},
		{"gpt-4-0613", "gpt-4"},
		{"gpt-3.5-turbo-0125", "gpt-3.5-turbo"},
		{"chatgpt-4o-latest", "chatgpt-4o"},
		{"claude-3-5-sonnet-20241022", "claude-3-5-sonnet"},
		{"claude-3-5-sonnet-latest", "claude-3-5-sonnet"},
		{"claude-sonnet-4-20250514", "claude-sonnet-4"},
		{"o1", "o1"},
		{"o1-2024-12-17", "o1"},
		{"llama3-70b-8192", "llama3-70b-8192"},
		{"gpt-4.1-nano", "gpt-4.1-nano"},
		{"-latest", "-latest"},
		{"", ""},
	} {
		if got := transport.ResolveModel(tc.in); got != tc.want {
			t.Errorf("ResolveModel(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func chatGPT(t *testing.T, e *env, model string) error {
	t.Helper()
	oc := openAIClient(e, 0)
	_, err := oc.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(50),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}, outputSeven)
	return err
}

// A dated snapshot and an alias are metered under their family's preset;
// a model with no preset is refused by default, naming the model and the
// fix, or metered under the fallback, or passed with an event when so
// configured: never silently.
func TestUnmeteredModels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := gpt4oEnv(t, transport.WithModelAliases(map[string]string{"my-gpt": "gpt-4o"}))
		for _, m := range []string{"gpt-4o-2024-08-06", "my-gpt"} {
			before := e.balances(t)
			if err := chatGPT(t, e, m); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": 10, "openai#gpt-4o#rpm": 1})
			if ev := lastEvent(t, e); ev.Outcome != transport.Settled || ev.Model != m {
				t.Errorf("%s: event %v for %q, want settled", m, ev.Outcome, ev.Model)
			}
		}

		before := e.balances(t)
		err := chatGPT(t, e, "gpt-4o-mini")
		if !errors.Is(err, transport.ErrUnmeteredModel) || !strings.Contains(err.Error(), `"gpt-4o-mini"`) || !strings.Contains(err.Error(), "preset") {
			t.Fatalf("gpt-4o-mini: %v, want ErrUnmeteredModel naming the model and the fix", err)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": 0, "openai#gpt-4o#rpm": 0})
		if ev := lastEvent(t, e); ev.Outcome != transport.Denied || ev.Model != "gpt-4o-mini" {
			t.Errorf("event %v %q, want denied gpt-4o-mini", ev.Outcome, ev.Model)
		}
		if s := e.tr.Stats(); s.Refused != 1 {
			t.Errorf("refused %d, want 1", s.Refused)
		}

		f := gpt4oEnv(t, transport.WithFallbackProfile(vendors.OpenAI, "gpt-4o"))
		before = f.balances(t)
		if err := chatGPT(t, f, "gpt-4o-mini"); err != nil {
			t.Fatal(err)
		}
		wantDebits(t, before, f.balances(t), map[string]int64{"openai#gpt-4o#tpm": 10, "openai#gpt-4o#rpm": 1})

		p := gpt4oEnv(t, transport.WithUnknownModels(transport.PassModel))
		if err := chatGPT(t, p, "gpt-4o-mini"); err != nil {
			t.Fatal(err)
		}
		if ev := lastEvent(t, p); ev.Outcome != transport.Passed || ev.Model != "gpt-4o-mini" || ev.PassReason == "" || ev.Status != http.StatusOK {
			t.Errorf("event %v %q %q %d, want passed gpt-4o-mini with a reason", ev.Outcome, ev.Model, ev.PassReason, ev.Status)
		}
		if s := p.tr.Stats(); s.Passed != 1 {
			t.Errorf("passed %d, want 1", s.Passed)
		}
	})
}

func TestFallbackMustBeAProfile(t *testing.T) {
	e := gpt4oEnv(t)
	p := openAIProfile(t, vendors.OpenAILimits{Model: "gpt-4o", TPM: 1000})
	if _, err := transport.New(e.client, []vendors.Profile{p}, transport.WithFallbackProfile(vendors.OpenAI, "gpt-5")); !errors.Is(err, transport.ErrNoProfile) {
		t.Errorf("fallback to a missing profile: %v", err)
	}
}

// An unknown endpoint passed through is reported and counted.
func TestPassThroughIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, vendorsim.Config{Vendor: vendorsim.OpenAI}, openAIProfile(t, vendors.OpenAILimits{RPM: 600, TPM: 100_000}))
		resp, err := e.httpClient().Get("http://" + simHost + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ev := lastEvent(t, e); ev.Outcome != transport.Passed || ev.PassReason != "unknown endpoint" {
			t.Errorf("event %v %q, want passed for an unknown endpoint", ev.Outcome, ev.PassReason)
		}
		if s := e.tr.Stats(); s.Passed != 1 {
			t.Errorf("passed %d, want 1", s.Passed)
		}
	})
}

// hostile answers every chat completion with the usage in body.
type hostile string

func (h hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"id":"x","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":` + string(h) + `}`))
}

// hostileEnv is a Transport over a memory store whose vendor is h.
func hostileEnv(t *testing.T, h http.Handler, events transport.EventFunc, opts ...transport.Option) (*env, *transport.Transport) {
	t.Helper()
	p := openAIProfile(t, vendors.OpenAILimits{Model: "gpt-4o", RPM: 600, TPM: 30_000_000})
	c, err := sluice.New(memstore.New(), sluice.WithClock(frozen))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Buckets() {
		if err := c.PutBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{client: c, profile: p}
	tr, err := transport.New(c, []vendors.Profile{p}, append([]transport.Option{transport.WithBase(pipeRT{h}),
		transport.WithRoute(transport.Route{Host: simHost, Vendor: vendors.OpenAI}), transport.WithEvents(events),
		transport.WithBodyTimeout(time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.tr = tr
	return e, tr
}

// A response reporting more usage than the request could have used is
// settled at the cap, never at the reported figure, and reported.
func TestHostileUsageIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var evs []transport.Event
		e, tr := hostileEnv(t, hostile(`{"prompt_tokens":26214400,"completion_tokens":26214400,"total_tokens":52428800}`),
			func(_ context.Context, ev transport.Event) { mu.Lock(); evs = append(evs, ev); mu.Unlock() })
		before := e.balances(t)
		if err := chatGPT(t, e, "gpt-4o"); err != nil {
			t.Fatal(err)
		}
		got := before["openai#gpt-4o#tpm"] - e.balances(t)["openai#gpt-4o#tpm"]
		t.Logf("reported 52428800 tokens, debited %d", got)
		// The body is well under 1 KiB: input at most its bytes + the
		// estimate + 4096; output at most max_tokens (50).
		if got > 50+1024+4096+16 || got < 50 {
			t.Errorf("tpm debited %d, want at most the request's bound", got)
		}
		mu.Lock()
		ev := evs[len(evs)-1]
		mu.Unlock()
		if !ev.UsageCapped || ev.Usage.Output != 26214400 || ev.Outcome != transport.Settled {
			t.Errorf("event capped=%v usage %+v outcome %v, want capped with the reported usage", ev.UsageCapped, ev.Usage, ev.Outcome)
		}
		if s := tr.Stats(); s.UsageCapped != 1 {
			t.Errorf("capped %d, want 1", s.UsageCapped)
		}
	})
}

// An ordinary response is not capped.
func TestPlausibleUsageIsNotCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := gpt4oEnv(t)
		if err := chatGPT(t, e, "gpt-4o"); err != nil {
			t.Fatal(err)
		}
		if ev := lastEvent(t, e); ev.UsageCapped || e.tr.Stats().UsageCapped != 0 {
			t.Errorf("an ordinary call was capped: %+v", ev.Usage)
		}
	})
}

// A panicking event function neither crashes the process nor loses the
// settlement; the panic is counted. The body timeout settles the call on
// the lease's timer goroutine, where an unrecovered panic would end the
// test binary.
func TestEventPanicIsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, tr := hostileEnv(t, hostile(`{"prompt_tokens":3,"completion_tokens":7}`),
			func(context.Context, transport.Event) { panic("boom") })
		before := e.balances(t)
		if err := chatGPT(t, e, "gpt-4o"); err != nil {
			t.Fatal(err)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": 10, "openai#gpt-4o#rpm": 1})
		// A body never read: settled by the timer.
		mid := e.balances(t)
		resp, err := e.httpClient().Post("http://"+simHost+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"gpt-4o","max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := tr.Stats().EventPanics; n != 2 {
			t.Errorf("event panics %d, want 2", n)
		}
		if got := mid["openai#gpt-4o#rpm"] - e.balances(t)["openai#gpt-4o#rpm"]; got != 1 {
			t.Errorf("rpm debited %d by the timed-out call, want 1", got)
		}
	})
}

// responsesUsage answers every request with a Responses API body whose
// usage is u.
type responsesUsage string

func (h responsesUsage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"id":"resp_2","object":"response","status":"completed","output":[],"usage":` + string(h) + `}`))
}

// A request that draws on the vendor's side (previous_response_id, a
// server-side tool such as web fetch) may report far more input than its
// body holds: it is capped at the input ceiling only.
func TestServerSideInputIsNotCappedAtTheBody(t *testing.T) {
	const conversation = `{"model":"gpt-4o","previous_response_id":"resp_1","input":"and then?","max_output_tokens":50}`
	tests := []struct {
		name   string
		body   string
		usage  string
		debit  int64
		capped bool
	}{
		{"a long conversation", conversation, `{"input_tokens":500000,"output_tokens":20,"total_tokens":500020}`, 500_020, false},
		{"beyond any context window", conversation, `{"input_tokens":26214400,"output_tokens":20,"total_tokens":26214420}`, transport.DefaultInputCeiling + 20, true},
		{"pages the vendor fetched", `{"model":"gpt-4o","input":"summarise it","tools":[{"type":"web_fetch_20250910","name":"web_fetch"}],"max_output_tokens":50}`,
			`{"input_tokens":50000,"output_tokens":20,"total_tokens":50020}`, 50_020, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var evs []transport.Event
				e, tr := hostileEnv(t, responsesUsage(tt.usage),
					func(_ context.Context, ev transport.Event) { mu.Lock(); evs = append(evs, ev); mu.Unlock() })
				before := e.balances(t)
				resp, err := e.httpClient().Post("http://"+simHost+"/v1/responses", "application/json",
					strings.NewReader(tt.body))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if got := before["openai#gpt-4o#tpm"] - e.balances(t)["openai#gpt-4o#tpm"]; got != tt.debit {
					t.Errorf("tpm debited %d, want %d", got, tt.debit)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(evs) != 1 || evs[0].UsageCapped != tt.capped || evs[0].Outcome != transport.Settled {
					t.Fatalf("events %+v, want one settled, capped %v", evs, tt.capped)
				}
				if n := tr.Stats().UsageCapped; (n == 1) != tt.capped {
					t.Errorf("capped count %d", n)
				}
			})
		})
	}
}
