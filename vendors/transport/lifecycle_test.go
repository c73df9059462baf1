package transport_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// A context cancelled mid-stream ends the call at once: the input the
// stream reported and the output it carried are settled (never below the
// admission charge) and the lease is released.
func TestCancelMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := anthropicProfile(t, vendors.AnthropicLimits{RPM: 600, InputTPM: 30_000, OutputTPM: 8_000})
		e := newEnv(t, vendorsim.Config{Vendor: vendorsim.Anthropic, Limits: vendorsim.Limits{RPM: 600, ITPM: 30_000, OTPM: 8_000},
			PerOutputToken: vendorsim.FixedDuration(10 * time.Millisecond)}, p,
			transport.WithReactorOptions(vendors.WithoutSync()),
			transport.WithOutputEstimate(func(transport.Estimate) int64 { return 1 }))
		ac := anthropicClient(e, 0)
		ctx, cancel := context.WithCancel(testCtx(t))
		before := e.balances(t)
		stream := ac.Messages.NewStreaming(ctx, messageParams(500), aoption.WithHeader(vendorsim.HeaderOutputTokens, "400"))
		deltas := 0
		for deltas < 20 && stream.Next() {
			if stream.Current().Type == "content_block_delta" {
				deltas++
			}
		}
		cancel()
		synctest.Wait()
		evs := e.eventList()
		if len(evs) != 1 {
			t.Fatalf("%d events after the cancel, want 1", len(evs))
		}
		ev := evs[0]
		if ev.Outcome != transport.Partial || ev.Usage.Input != 3 {
			t.Fatalf("event %v usage %+v, want partial with message_start's 3 input tokens", ev.Outcome, ev.Usage)
		}
		out := ev.Final[2].Amount
		if out < 20 || out >= 400 {
			t.Errorf("output settled to %d, want the streamed part: at least the 20 tokens read, less than the 400 asked", out)
		}
		if in := ev.Final[1].Amount; in != max(ev.Admitted[1].Amount, 3) {
			t.Errorf("input settled to %d, want max(admitted %d, reported 3)", in, ev.Admitted[1].Amount)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{aRPM: 1, aIn: ev.Final[1].Amount, aOut: out})
		stream.Close()
		if n := len(e.eventList()); n != 1 {
			t.Errorf("%d events after Close, want still 1", n)
		}
	})
}

// A body never read nor closed does not hold its lease for ever: it ends
// after the body timeout, settled at the admission charge.
func TestBodyNeverReadTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := gpt4oEnv(t, transport.WithBodyTimeout(30*time.Second))
		oc := openAIClient(e, 0)
		before := e.balances(t)
		stream := oc.Chat.Completions.NewStreaming(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(50),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}, outputSeven)
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if n := len(e.eventList()); n != 0 {
			t.Fatalf("%d events before the body timeout, want 0", n)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		evs := e.eventList()
		if len(evs) != 1 || evs[0].Outcome != transport.Partial {
			t.Fatalf("events %+v, want one partial", evs)
		}
		if !errors.Is(evs[0].Err, transport.ErrBodyTimeout) {
			t.Errorf("event error %v, want ErrBodyTimeout", evs[0].Err)
		}
		wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": evs[0].Admitted[1].Amount, "openai#gpt-4o#rpm": 1})
		stream.Close()
	})
}

// The request's context ending settles an unread body at once.
func TestBodyNeverReadContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := gpt4oEnv(t)
		oc := openAIClient(e, 0)
		ctx, cancel := context.WithCancel(testCtx(t))
		stream := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(50),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}, outputSeven)
		synctest.Wait()
		if n := len(e.eventList()); n != 0 {
			t.Fatalf("%d events while the body is held, want 0", n)
		}
		cancel()
		synctest.Wait()
		evs := e.eventList()
		if len(evs) != 1 || evs[0].Outcome != transport.Partial || evs[0].Final[1].Amount != evs[0].Admitted[1].Amount {
			t.Fatalf("events %+v, want one partial at the admission charge", evs)
		}
		stream.Close()
	})
}

// A connection refused: the vendor never saw the request, so everything is
// refunded, requests included.
func TestDialErrorRefunded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e := realEnv(t, addr)
	oc := openai.NewClient(option.WithBaseURL("http://"+addr+"/v1/"), option.WithAPIKey("sk"), option.WithHTTPClient(e.httpClient()), option.WithMaxRetries(0))
	before := e.balances(t)
	_, err = oc.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(50),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}})
	if err == nil {
		t.Fatal("no error from a closed port")
	}
	ev := lastEvent(t, e)
	if ev.Outcome != transport.Refunded || ev.Err == nil {
		t.Fatalf("event %v (%v), want refunded with the dial error", ev.Outcome, ev.Err)
	}
	wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": 0, "openai#gpt-4o#rpm": 0})
}

// A TLS handshake that fails (a certificate this process does not trust:
// its configuration, not the vendor) sent nothing: everything is
// refunded, so a misconfigured process does not burn the fleet's limits.
func TestTLSHandshakeFailureRefunded(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the request reached the server")
	}))
	defer srv.Close()
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake's failure, expected
	addr := strings.TrimPrefix(srv.URL, "https://")
	e := realEnv(t, addr)
	oc := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk"), option.WithHTTPClient(e.httpClient()), option.WithMaxRetries(0))
	before := e.balances(t)
	_, err := oc.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(5000),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("err %v, want a certificate error", err)
	}
	ev := lastEvent(t, e)
	if ev.Outcome != transport.Refunded || ev.Err == nil {
		t.Fatalf("event %v (%v), want refunded with the handshake's error", ev.Outcome, ev.Err)
	}
	wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": 0, "openai#gpt-4o#rpm": 0})
}

// A connection dropped after the request was sent: the vendor may have
// counted it, so the admission charge is kept.
func TestResetAfterSendCharged(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	e := realEnv(t, addr)
	oc := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk"), option.WithHTTPClient(e.httpClient()), option.WithMaxRetries(0))
	before := e.balances(t)
	_, err := oc.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(50),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}})
	if err == nil {
		t.Fatal("no error from a dropped connection")
	}
	ev := lastEvent(t, e)
	if ev.Outcome != transport.Charged {
		t.Fatalf("event %v (%v), want charged", ev.Outcome, ev.Err)
	}
	wantDebits(t, before, e.balances(t), map[string]int64{"openai#gpt-4o#tpm": 50, "openai#gpt-4o#rpm": 1})
}

// realEnv is an env whose Transport sends over the network to addr.
func realEnv(t *testing.T, addr string, opts ...transport.Option) *env {
	t.Helper()
	return realEnvProfile(t, addr, openAIProfile(t, vendors.OpenAILimits{Model: "gpt-4o", RPM: 600, TPM: 100_000}), opts...)
}

func realEnvProfile(t *testing.T, addr string, p vendors.Profile, opts ...transport.Option) *env {
	t.Helper()
	e := &env{profile: p}
	c, err := sluice.New(memstore.New(), sluice.WithClock(frozen))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Buckets() {
		if err := c.PutBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	e.client = c
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	opts = append([]transport.Option{transport.WithBase(base),
		transport.WithRoute(transport.Route{Host: addr, Vendor: p.Vendor}),
		transport.WithEvents(func(_ context.Context, ev transport.Event) {
			e.mu.Lock()
			e.events = append(e.events, ev)
			e.mu.Unlock()
		})}, opts...)
	e.tr, err = transport.New(c, []vendors.Profile{p}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Reading to the end and closing race: every call finishes exactly once,
// and the store holds exactly what the events say was left charged.
func TestCloseAndEOFRace(t *testing.T) {
	for _, stream := range []bool{false, true} {
		// The Client's clock is frozen: room for every call at once.
		p := openAIProfile(t, vendors.OpenAILimits{Model: "gpt-4o", RPM: 6000, TPM: 100_000})
		e := newEnv(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 6000, TPM: 100_000}}, p)
		hc := e.httpClient()
		const calls = 40
		body := `{"model":"gpt-4o","max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`
		if stream {
			body = `{"model":"gpt-4o","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hello there"}]}`
		}
		before := e.balances(t)
		var wg sync.WaitGroup
		for range calls {
			req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, "http://"+simHost+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set(vendorsim.HeaderOutputTokens, "7")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, resp.Body) }()
			go func() { defer wg.Done(); _ = resp.Body.Close() }()
		}
		wg.Wait()
		evs := e.eventList()
		if len(evs) != calls {
			t.Fatalf("stream %v: %d events for %d calls, want one each", stream, len(evs), calls)
		}
		want := map[string]int64{}
		for _, ev := range evs {
			for _, ch := range ev.Final {
				want[ch.Dimension] += ch.Amount
			}
		}
		wantDebits(t, before, e.balances(t), want)
	}
}

// closeCounter counts the Close calls of the response bodies of rt.
type closeCounter struct {
	rt     http.RoundTripper
	closed atomic.Int32
}

func (c *closeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := c.rt.RoundTrip(req)
	if err == nil {
		res.Body = &countedBody{ReadCloser: res.Body, n: &c.closed}
	}
	return res, err
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int32
}

func (b *countedBody) Close() error { b.n.Add(1); return b.ReadCloser.Close() }

// A body that went unread for the body timeout is closed as it is settled:
// the connection under it is not left open for a caller that never comes
// back.
func TestBodyTimeoutClosesTheResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cc := &closeCounter{}
		e := gpt4oEnv(t, transport.WithBodyTimeout(30*time.Second), transport.WithBase(cc))
		cc.rt = pipeRT{e.sim}
		oc := openAIClient(e, 0)
		stream := oc.Chat.Completions.NewStreaming(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(50),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}, outputSeven)
		defer stream.Close()
		time.Sleep(40 * time.Second)
		synctest.Wait()
		if n := len(e.eventList()); n != 1 {
			t.Fatalf("%d events after the body timeout, want 1", n)
		}
		if got := cc.closed.Load(); got != 1 {
			t.Errorf("the vendor's response body was closed %d times after the body timeout, want 1", got)
		}
	})
}
