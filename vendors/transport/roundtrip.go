package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/vendors"
)

// maxErrorBody is how much of an error response's body the Reactor reads
// (vendors.Classify ignores longer ones).
const maxErrorBody = 1 << 20

// RoundTrip implements http.RoundTripper. It returns the base transport's
// response or error unchanged, except that the response body is wrapped to
// settle the call. It does not send the request, and returns an error,
// when the call gets no slot: one matching sluice.ErrSlotTimeout, at once,
// when the store answers that the slot comes later than the request's
// deadline (or, without one, the Client's DefaultSlotTimeout); the context's error when the request is
// cancelled while it waits (its reservation is cancelled); a store error,
// matching sluice.ErrUnavailable when the store cannot be reached (unless
// the Client fails open).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.do(req, t.base.RoundTrip)
}

// Middleware meters one request as RoundTrip does, sending it with next
// instead of the base transport. Its type is the official SDKs'
// option.Middleware, so it can be given as
//
//	option.WithMiddleware(t.Middleware)
//
// to the OpenAI and Anthropic SDKs, in place of WithHTTPClient: the SDK's
// own HTTP client then sends the request, and its retries each pass
// through the middleware. A refusal that another attempt could not change
// (a slot past the request's deadline, a model no profile meters, a
// dimension or cost the store refuses) comes back with a stand-in response
// saying x-should-retry: false beside the error, so that the SDK returns
// the error at once rather than retrying it with its own backoff.
func (t *Transport) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	resp, err := t.do(req, next)
	if err != nil && resp == nil && final(err) {
		h := http.Header{}
		h.Set("X-Should-Retry", "false")
		var ste *sluice.SlotTimeoutError
		if errors.As(err, &ste) {
			h.Set("Retry-After-Ms", strconv.FormatInt(ste.RetryIn.Milliseconds(), 10))
		}
		return &http.Response{StatusCode: http.StatusTooManyRequests, Status: "429 Refused by Sluice", Header: h,
			Body: http.NoBody, Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, err
	}
	return resp, err
}

// final reports a refusal that another attempt of the same request could
// not change.
func final(err error) bool {
	var fe *sluice.FieldError
	return errors.Is(err, sluice.ErrSlotTimeout) || errors.Is(err, ErrUnmeteredModel) ||
		errors.Is(err, sluice.ErrUnknownDimension) || errors.Is(err, sluice.ErrCostExceedsCapacity) || errors.As(err, &fe)
}

// sender sends a request: the base transport's RoundTrip, or a
// middleware's next.
type sender = func(*http.Request) (*http.Response, error)

func (t *Transport) do(req *http.Request, next sender) (*http.Response, error) {
	rt, ok := t.route(req)
	if !ok {
		return next(req)
	}
	path := strings.TrimPrefix(req.URL.Path, rt.PathPrefix)
	if rt.PathPrefix != "" {
		path = "/" + strings.TrimPrefix(path, "/")
	}
	ep := ParseEndpoint(rt.Vendor, req.Method, path)
	if ep.API == UnknownAPI {
		return t.other(req, next, rt.Vendor, nil, "unknown endpoint")
	}
	raw, err := readBody(req)
	if err != nil {
		return nil, err
	}
	est, err := t.est.Estimate(rt.Vendor, ep.API, raw)
	if err != nil {
		return t.other(req, next, rt.Vendor, raw, "body not estimable: "+err.Error())
	}
	if ep.Deployment != "" {
		est.Model = ep.Deployment
	}
	e := t.resolve(rt.Vendor, est.Model)
	if e == nil {
		return t.unmetered(req, next, Event{Vendor: rt.Vendor, API: ep.API, Model: est.Model, Estimate: est}, raw)
	}
	if t.inject && ep.API == ChatCompletions && est.Stream && !est.IncludeUsage && acceptsStreamOptions(rt.Vendor, req) {
		raw = injectIncludeUsage(raw)
	}
	c := &call{t: t, e: e, ctx: req.Context(), ev: Event{Vendor: rt.Vendor, API: ep.API, Model: est.Model, Estimate: est},
		inCap: t.inputCap(raw, est)}
	charges, err := e.p.Admission(est.Call(t.outputEstimate(rt.Vendor, est)))
	if err != nil {
		return nil, t.denied(c, fmt.Errorf("transport: admission charge of %s: %w", est, err))
	}
	c.ev.Admitted = charges
	reqs := make([]sluice.Request, len(charges))
	for i, ch := range charges {
		reqs[i] = sluice.Request{Dimension: ch.Dimension, Cost: ch.Amount}
	}
	h, waited, attempts, err := t.acquire(req.Context(), reqs)
	if err != nil && probeable(e.p, reqs, err) {
		// The bucket was lowered below what the profile publishes (a
		// followed limit, or an operator's change): the call takes the
		// whole bucket and goes, so that the vendor's answer can speak
		// again; its usage settles as any call's does.
		var more time.Duration
		var n int
		h, more, n, err = t.acquire(req.Context(), reqs)
		waited, attempts = waited+more, attempts+n
	}
	c.ev.Waited, c.ev.Attempts = waited, attempts
	if err != nil {
		return nil, t.denied(c, fmt.Errorf("transport: acquiring %s for %s: %w", describe(reqs), est.API, err))
	}
	c.hold(h)
	return t.send(c, next, req, raw, est.Stream)
}

// send forwards the request and hands the response to the call.
func (t *Transport) send(c *call, next sender, req *http.Request, raw []byte, stream bool) (*http.Response, error) {
	var wrote, gotConn, noTLS atomic.Bool
	trace := &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { gotConn.Store(true) },
		WroteHeaders: func() { wrote.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
		// A failed handshake (a certificate not trusted here, a protocol
		// refused) sent no byte of the request.
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			if err != nil {
				noTLS.Store(true)
			}
		},
	}
	out := withBody(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)), raw)
	sent := t.clock.Now()
	c.mu.Lock()
	c.sent = sent
	c.mu.Unlock()
	resp, err := sendOrEnd(c, next, out)
	if err != nil {
		o := Charged
		if !wrote.Load() && (neverSent(err) || noTLS.Load()) {
			o = Refunded
		}
		c.finish(o, vendors.Usage{}, nil, err)
		return nil, err
	}
	c.ev.Status, c.ev.Latency = resp.StatusCode, t.clock.Now().Sub(sent)
	rerr := t.react(c, resp)
	if rerr != nil {
		c.addErr(rerr)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		o := Rejected
		if resp.StatusCode >= 500 {
			o = Failed
		}
		c.finish(o, vendors.Usage{}, nil, nil)
		return resp, nil
	}
	// A stream asked for may come back as one JSON document (a proxy, a
	// vendor that declined to stream): the response's type decides.
	ct := resp.Header.Get("Content-Type")
	stream = isEventStream(ct) || stream && !isJSON(ct)
	enc := ""
	if !resp.Uncompressed {
		enc = resp.Header.Get("Content-Encoding")
	}
	b := newBody(c, resp.Body, stream, enc)
	c.body.Store(b)
	c.watch(b)
	resp.Body = b
	return resp, nil
}

// sendOrEnd sends out with next; a panic below ends the call as charged
// (the request may have been sent) before it goes on up, so that a caller
// that recovers from it (net/http's server does, for a handler) leaves no
// lease renewed for ever.
func sendOrEnd(c *call, next sender, out *http.Request) (*http.Response, error) {
	defer func() {
		if r := recover(); r != nil {
			c.finish(Charged, vendors.Usage{}, nil, fmt.Errorf("transport: panic below the transport: %v", r))
			panic(r)
		}
	}()
	return next(out)
}

// react gives the response to the profile's Reactor: headers always, the
// body too (restored for the caller) when the status is not 2xx.
func (t *Transport) react(c *call, resp *http.Response) error {
	var errBody []byte
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		errBody, resp.Body = peekBody(resp.Body)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), finishTimeout)
	defer cancel()
	re, err := c.e.r.Observe(ctx, resp.StatusCode, resp.Header, errBody)
	c.ev.Reaction = &re
	c.ev.VendorErr = re.Err()
	t.addDrift(ctx, &c.ev, re.Drift)
	return err
}

// other handles a request to a routed host that the Transport cannot
// estimate, by the UnknownPolicy. raw is its body when it was read.
func (t *Transport) other(req *http.Request, next sender, v vendors.Vendor, raw []byte, reason string) (*http.Response, error) {
	e := t.profiles[v][""]
	if t.unknown != CountRequests || e == nil || e.requests == "" {
		return t.pass(req, next, Event{Vendor: v}, raw, reason)
	}
	if raw != nil {
		req = withBody(req.WithContext(req.Context()), raw)
	}
	c := &call{t: t, e: e, ctx: req.Context(), ev: Event{Vendor: v, Admitted: []vendors.Charge{{Metric: vendors.Requests, Dimension: e.requests, Amount: 1}}}}
	h, waited, attempts, err := t.acquire(req.Context(), []sluice.Request{{Dimension: e.requests, Cost: 1}})
	c.ev.Waited, c.ev.Attempts = waited, attempts
	if err != nil {
		return nil, t.denied(c, fmt.Errorf("transport: acquiring a request on %s: %w", e.requests, err))
	}
	c.h, c.lease = h, h.Lease()
	resp, err := next(req)
	if err == nil {
		c.ev.Status = resp.StatusCode
		if rerr := t.react(c, resp); rerr != nil {
			c.addErr(rerr)
		}
	}
	c.finish(Counted, vendors.Usage{}, nil, err)
	return resp, err
}

// denied reports a call that got no slot and returns err.
func (t *Transport) denied(c *call, err error) error {
	c.ev.Outcome, c.ev.Err = Denied, err
	t.emit(c.ctx, c.ev)
	return err
}

// readBody reads and closes req's body.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return []byte{}, nil
	}
	defer req.Body.Close()
	raw, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, fmt.Errorf("transport: reading the request body: %w", err)
	}
	return raw, nil
}

// withBody sets r (a copy of the caller's request) to send raw, replayable
// through GetBody.
func withBody(r *http.Request, raw []byte) *http.Request {
	r.ContentLength = int64(len(raw))
	if len(raw) == 0 && r.Method == http.MethodGet {
		r.Body, r.GetBody = http.NoBody, nil
		return r
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	return r
}

// errorBodyWait bounds the wait for an error response's body: one that
// stalls is classified by its headers alone, so that it holds no call.
const errorBodyWait = 5 * time.Second

// peekBody reads up to maxErrorBody bytes of rc and returns them with a
// body that yields the same bytes and then the rest. When they take longer
// than errorBodyWait it returns no bytes, and a body that yields them, as
// they come, and then the rest.
func peekBody(rc io.ReadCloser) ([]byte, io.ReadCloser) {
	read := make(chan []byte, 1)
	go func() {
		head, _ := io.ReadAll(io.LimitReader(rc, maxErrorBody))
		read <- head
	}()
	t := time.NewTimer(errorBodyWait)
	defer t.Stop()
	select {
	case head := <-read:
		return head, struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), rc), rc}
	case <-t.C:
		return nil, &lateBody{read: read, rc: rc}
	}
}

// lateBody is an error body peekBody stopped waiting for: its first bytes
// are still being read into read.
type lateBody struct {
	read chan []byte
	rc   io.ReadCloser
	r    io.Reader // once the first bytes came
}

func (b *lateBody) Read(p []byte) (int, error) {
	if b.r == nil {
		b.r = io.MultiReader(bytes.NewReader(<-b.read), b.rc)
	}
	return b.r.Read(p)
}

func (b *lateBody) Close() error { return b.rc.Close() } // ends the read in progress

// neverSent reports an error that happened before a connection existed:
// the dial failed or the name did not resolve.
func neverSent(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func isEventStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// acceptsStreamOptions reports whether the vendor takes stream_options on
// req: Azure refuses it (400) on API versions before 2024-09-01-preview;
// an api-version that is not a date ("preview", the v1 API) takes it.
func acceptsStreamOptions(v vendors.Vendor, req *http.Request) bool {
	if v != vendors.Azure {
		return true
	}
	ver := req.URL.Query().Get("api-version")
	if len(ver) < 10 || ver[4] != '-' || ver[7] != '-' {
		return true
	}
	return ver[:10] >= "2024-09-01"
}

// injectIncludeUsage adds "stream_options": {"include_usage": true} to a
// chat completion request, keeping any other stream option; a request
// that sets include_usage (to false: the caller does not want the usage
// chunk) is left as it is.
func injectIncludeUsage(raw []byte) []byte {
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	if !bytes.Contains(raw, []byte(`"stream_options"`)) && len(trimmed) > 1 && trimmed[0] == '{' {
		rest := bytes.TrimLeft(trimmed[1:], " \t\r\n")
		out := make([]byte, 0, len(raw)+40)
		out = append(out, `{"stream_options":{"include_usage":true}`...)
		if len(rest) > 0 && rest[0] != '}' {
			out = append(out, ',')
		}
		return append(out, rest...)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	so := map[string]json.RawMessage{}
	if v, ok := m["stream_options"]; ok && string(v) != "null" {
		if json.Unmarshal(v, &so) != nil {
			return raw
		}
	}
	if _, set := so["include_usage"]; set {
		return raw
	}
	so["include_usage"] = json.RawMessage("true")
	m["stream_options"], _ = json.Marshal(so)
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

func describe(reqs []sluice.Request) string {
	var b strings.Builder
	for i, r := range reqs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%d", r.Dimension, r.Cost)
	}
	return b.String()
}

// probeable reports whether err refuses reqs only because a cost exceeds a
// bucket lowered below the capacity p gives it, and if so lowers that cost
// in reqs to the bucket's capacity: a call the published limit admits is
// never refused forever by a lowered bucket.
func probeable(p vendors.Profile, reqs []sluice.Request, err error) bool {
	var ce *sluice.CostError
	if !errors.As(err, &ce) || ce.Capacity < 1 {
		return false
	}
	for _, d := range p.Dimensions {
		if d.Name != ce.Dimension || ce.Cost > d.Config.Capacity || ce.Capacity >= d.Config.Capacity {
			continue
		}
		for i := range reqs {
			if reqs[i].Dimension == ce.Dimension && reqs[i].Cost > ce.Capacity {
				reqs[i].Cost = ce.Capacity
				return true
			}
		}
	}
	return false
}
