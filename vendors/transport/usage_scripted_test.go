package transport_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
)

// rtFunc is a RoundTripper that answers with a function.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// scriptedEnv returns a Transport for p over rt, on a frozen clock, and
// the events it reported so far.
func scriptedEnv(t *testing.T, p vendors.Profile, rt http.RoundTripper) (*transport.Transport, func() []transport.Event) {
	t.Helper()
	c, err := sluice.New(memstore.New(), sluice.WithClock(frozen))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Buckets() {
		if err := c.PutBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var evs []transport.Event
	tr, err := transport.New(c, []vendors.Profile{p}, transport.WithBase(rt),
		transport.WithRoute(transport.Route{Host: simHost, Vendor: p.Vendor}),
		transport.WithEvents(func(_ context.Context, ev transport.Event) { mu.Lock(); evs = append(evs, ev); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	return tr, func() []transport.Event { mu.Lock(); defer mu.Unlock(); return append([]transport.Event(nil), evs...) }
}

// scriptedResponse answers r with 200, h and body.
func scriptedResponse(r *http.Request, h http.Header, body []byte) *http.Response {
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(bytes.NewReader(body)), Request: r, ContentLength: int64(len(body))}
}

// chargeOf returns the amount of dim in cs, -1 if absent.
func chargeOf(cs []vendors.Charge, dim string) int64 {
	for _, ch := range cs {
		if ch.Dimension == dim {
			return ch.Amount
		}
	}
	return -1
}

// oneEvent sends body to the Messages API through tr and returns the one
// event it reported; read reads the response's body.
func oneEvent(t *testing.T, tr *transport.Transport, events func() []transport.Event, body string, header http.Header, read func(io.Reader) error) transport.Event {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+simHost+"/v1/messages", strings.NewReader(body))
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := read(resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	evs := events()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	return evs[0]
}

func discard(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err }

// A response whose usage gives no input count (absent, null or negative)
// settles the input at the estimate's count of the prompt, never at zero:
// refunding the prompt would let the fleet spend tokens the vendor has
// counted.
func TestUnknownInputSettlesAtTheEstimate(t *testing.T) {
	for _, usage := range []string{`{"input_tokens":-1,"output_tokens":40}`, `{"input_tokens":null,"output_tokens":40}`, `{"output_tokens":40}`} {
		p := anthropicProfile(t, vendors.AnthropicLimits{RPM: 600, InputTPM: 30_000, OutputTPM: 8_000})
		tr, events := scriptedEnv(t, p, rtFunc(func(r *http.Request) (*http.Response, error) {
			return scriptedResponse(r, http.Header{}, []byte(`{"id":"m","type":"message","content":[{"type":"text","text":"hi"}],"usage":`+usage+`}`)), nil
		}))
		prompt := strings.Repeat("lorem ipsum dolor sit amet ", 2000)
		ev := oneEvent(t, tr, events, `{"model":"claude-sonnet-4","max_tokens":100,"messages":[{"role":"user","content":"`+prompt+`"}]}`, nil, discard)
		if fin, want := chargeOf(ev.Final, aIn), ev.Estimate.InputTokens; fin != want || want < 10_000 {
			t.Errorf("usage %s: %s settled to %d, want the estimate's %d for the prompt", usage, aIn, fin, want)
		}
		if out := chargeOf(ev.Final, "anthropic#output_tpm"); out != 40 {
			t.Errorf("usage %s: output settled to %d, want the 40 reported", usage, out)
		}
	}
}

// A compressed response (the caller asked for gzip itself, so the body
// reaches it undecoded) has its usage read all the same.
func TestCompressedResponseUsageIsRead(t *testing.T) {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	if _, err := w.Write([]byte(`{"id":"m","type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":20,"output_tokens":4000}}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p := anthropicProfile(t, vendors.AnthropicLimits{RPM: 600, InputTPM: 30_000, OutputTPM: 8_000})
	tr, events := scriptedEnv(t, p, rtFunc(func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		h.Set("Content-Encoding", "gzip")
		return scriptedResponse(r, h, gz.Bytes()), nil
	}))
	ev := oneEvent(t, tr, events, `{"model":"claude-sonnet-4","max_tokens":4096,"messages":[{"role":"user","content":"write me an essay"}]}`,
		http.Header{"Accept-Encoding": {"gzip"}}, func(r io.Reader) error {
			zr, err := gzip.NewReader(r)
			if err != nil {
				return err
			}
			return discard(zr)
		})
	if ev.Outcome != transport.Settled || ev.Usage.Output != 4000 || ev.Usage.Input != 20 {
		t.Errorf("outcome %v usage %+v, want settled at the 20 input and 4000 output tokens reported", ev.Outcome, ev.Usage)
	}
	if out := chargeOf(ev.Final, "anthropic#output_tpm"); out != 4000 {
		t.Errorf("output settled to %d, want 4000", out)
	}
}

// A panic in the transport below (a bug in a middleware, say) that the
// caller recovers from, as net/http's server does for a handler, still
// ends the call: its lease is released, not renewed for ever.
func TestPanicBelowEndsTheCall(t *testing.T) {
	p := anthropicProfile(t, vendors.AnthropicLimits{RPM: 600, InputTPM: 30_000, OutputTPM: 8_000})
	tr, events := scriptedEnv(t, p, rtFunc(func(*http.Request) (*http.Response, error) {
		panic("a bug below the transport")
	}))
	req, _ := http.NewRequest("POST", "http://"+simHost+"/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		_, _ = tr.RoundTrip(req)
	}()
	evs := events()
	if len(evs) != 1 || evs[0].Outcome != transport.Charged {
		t.Fatalf("events %+v, want one charged (the request may have been sent)", evs)
	}
}

// An error response whose body stalls (headers sent, body not) does not
// hold the call: after a short wait the Reactor takes the headers alone,
// the call ends and its lease is released, and the caller still reads the
// whole body as it comes.
func TestStalledErrorBodyHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := anthropicProfile(t, vendors.AnthropicLimits{RPM: 600, InputTPM: 30_000, OutputTPM: 8_000})
		pr, pw := io.Pipe()
		tr, events := scriptedEnv(t, p, rtFunc(func(r *http.Request) (*http.Response, error) {
			h := http.Header{}
			h.Set("Content-Type", "application/json")
			h.Set("retry-after", "2")
			return &http.Response{StatusCode: 429, Header: h, Body: pr, Request: r}, nil
		}))
		req, _ := http.NewRequest("POST", "http://"+simHost+"/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
		var resp *http.Response
		var err error
		done := make(chan struct{})
		go func() { resp, err = tr.RoundTrip(req); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("RoundTrip still waits for the stalled error body after 30 s")
			_ = pw.CloseWithError(io.ErrUnexpectedEOF)
			<-done
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if evs := events(); len(evs) != 1 || evs[0].Outcome != transport.Rejected {
			t.Fatalf("events %+v, want the call ended as rejected", evs)
		}
		const body = `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`
		go func() { _, _ = io.WriteString(pw, body); _ = pw.Close() }()
		got, err := io.ReadAll(resp.Body)
		if err != nil || string(got) != body {
			t.Errorf("the caller read %q, %v; want the whole body", got, err)
		}
		resp.Body.Close()
	})
}
