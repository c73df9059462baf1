package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// The clients of the sluice mode: how its calls reach Sluice.
const (
	// clientTransport sends every call with the vendor's official Go SDK
	// through vendors/transport, which estimates, waits in line, settles
	// and reacts.
	clientTransport = "transport"
	// clientManual acquires, settles and reacts by hand (sluiceCall).
	clientManual = "manual"
)

// vbTransport is the sluice mode's transport client: the official SDK of
// the run's vendor, with vendors/transport as its HTTP client's transport.
type vbTransport struct {
	p      *vbProcess
	openai openai.Client
	claude anthropic.Client
	model  string
}

// vbCallKey is the context key of a call's vbCallRec.
type vbCallKey struct{}

// vbCallRec is what one SDK call through the transport saw: the
// transport's event and the time spent in the vendor's round trip.
type vbCallRec struct {
	mu     sync.Mutex
	ev     *transport.Event
	start  time.Time
	vendor time.Duration
}

func callRec(ctx context.Context) *vbCallRec {
	r, _ := ctx.Value(vbCallKey{}).(*vbCallRec)
	return r
}

// newVBTransport builds the SDK client of p's vendor on a Transport
// metering through c. The profile is scoped to the requests' model, so
// that the Transport routes them to it; its dimensions keep the bench
// scope (openai#bench#tpm).
func newVBTransport(p *vbProcess, c *sluice.Client) (*vbTransport, error) {
	u, err := url.Parse(p.run.URL)
	if err != nil {
		return nil, fmt.Errorf("bench: the simulator's URL %q: %w", p.run.URL, err)
	}
	x := &vbTransport{p: p, model: vendorModel(p.run.Vendor)}
	prof := p.prof
	prof.Scope = x.model
	var ropts []vendors.ReactorOption
	if !p.run.Sync {
		ropts = append(ropts, vendors.WithoutSync())
	}
	if !p.run.Follow {
		ropts = append(ropts, vendors.WithoutLimitFollowing())
	}
	est, err := outputOption(p.run.OutputEstimate)
	if err != nil {
		return nil, err
	}
	t, err := transport.New(c, []vendors.Profile{prof}, est,
		transport.WithBase(timedRoundTripper{p.http.Transport}),
		transport.WithRoute(transport.Route{Host: u.Host, Vendor: vendors.Vendor(p.run.Vendor)}),
		transport.WithReactorOptions(ropts...),
		transport.WithEvents(func(ctx context.Context, ev transport.Event) {
			if r := callRec(ctx); r != nil {
				r.mu.Lock()
				r.ev = &ev
				r.mu.Unlock()
			}
		}))
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: t}
	switch p.run.Vendor {
	case vendorsim.OpenAI:
		x.openai = openai.NewClient(option.WithBaseURL(p.run.URL+"/v1/"), option.WithAPIKey("sk-bench"),
			option.WithHTTPClient(hc), option.WithMaxRetries(0))
	case vendorsim.Azure:
		// The SDK's Azure options send plain HTTP to a loopback address
		// with a transport of their own, past the HTTP client's: the
		// Transport meters as the SDK's middleware instead, after the
		// Azure options have put the deployment in the path, and the
		// vendor's round trip is timed by the middleware after it.
		x.openai = openai.NewClient(azure.WithEndpoint(p.run.URL, azureAPIVersion), azure.WithUnsafeAllowHTTP(),
			azure.WithAPIKey("azure-bench"), option.WithHTTPClient(p.http), option.WithMaxRetries(0),
			option.WithMiddleware(t.Middleware), option.WithMiddleware(timedMiddleware))
	case vendorsim.Anthropic:
		x.claude = anthropic.NewClient(aoption.WithBaseURL(p.run.URL+"/"), aoption.WithAPIKey("sk-ant-bench"),
			aoption.WithHTTPClient(hc), aoption.WithMaxRetries(0))
	}
	return x, nil
}

// sdkCall makes c's request with the SDK: the prompt of c.Input tokens
// (as the simulator counts them), max_completion_tokens (OpenAI) or
// max_tokens (Anthropic), and the simulator told the output length.
func (x *vbTransport) sdkCall(ctx context.Context, c genCall) error {
	out := strconv.FormatInt(c.Output, 10)
	if x.p.run.Vendor == vendorsim.Anthropic {
		_, err := x.claude.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(x.model), MaxTokens: c.MaxTokens,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt(c.Input)))}},
			aoption.WithHeader(vendorsim.HeaderOutputTokens, out))
		return err
	}
	_, err := x.openai.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: x.model,
		MaxCompletionTokens: openai.Int(c.MaxTokens),
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt(c.Input))}},
		option.WithHeader(vendorsim.HeaderOutputTokens, out))
	return err
}

// call sends c through the transport until it is not rate limited: the
// SDK retries nothing (WithMaxRetries(0)); a retryable 429 sends it again,
// through the transport, after the Reactor has cooled the fleet down, as
// the manual client does. The run's end cancels a call still waiting for
// its slot, as it does the manual client's wait: the request's context
// has no deadline, which would make the transport fail at once (with a
// slot.timeout warning) every call whose slot comes after the end.
func (x *vbTransport) call(rctx context.Context, c genCall) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(rctx))
	defer cancel()
	stop := context.AfterFunc(rctx, cancel)
	defer stop()
	for {
		rec := &vbCallRec{}
		t0 := time.Now()
		err := x.sdkCall(context.WithValue(ctx, vbCallKey{}, rec), c)
		total := time.Since(t0)
		rec.mu.Lock()
		ev, vendor := rec.ev, rec.vendor
		rec.mu.Unlock()
		if ev == nil {
			// The transport did not meter the call: a routing mistake.
			x.p.count(response{err: fmt.Errorf("bench: the transport did not meter a call: %v", err)}, vendors.Classification{}, 0, total)
			return
		}
		if ev.Outcome == transport.Denied {
			x.denied(rctx, ev)
			return
		}
		retry := x.account(rctx, ev, err, total, vendor)
		if !retry || rctx.Err() != nil {
			return
		}
	}
}

// denied accounts for a call that got no slot.
func (x *vbTransport) denied(rctx context.Context, ev *transport.Event) {
	if rctx.Err() != nil || errors.Is(ev.Err, sluice.ErrSlotTimeout) {
		x.p.abandoned()
		// No slot before the run's end: drawing further requests would
		// only ask the store again and again.
		<-rctx.Done()
		return
	}
	x.p.storeError(ev.Err)
}

// account records a call the transport sent, and reports whether it was
// rate limited (to send again).
func (x *vbTransport) account(rctx context.Context, ev *transport.Event, sdkErr error, total, vendor time.Duration) bool {
	p := x.p
	var cl vendors.Classification
	if re := ev.Reaction; re != nil {
		cl = re.Classification
		p.mu.Lock()
		p.part.Cooled += int64(len(re.Cooled))
		p.part.Synced += int64(len(re.Synced))
		p.part.Resized += int64(len(re.Resized))
		p.mu.Unlock()
	}
	p.estimated(ev)
	overhead := max(0, total-ev.Waited-vendor)
	switch ev.Outcome {
	case transport.Partial, transport.Charged:
		if rctx.Err() != nil {
			// Sent, and cut off by the run's end.
			p.count(response{status: ev.Status}, vendors.Classification{Kind: vendors.OK}, ev.Waited, overhead)
			p.abandoned()
			return false
		}
		p.count(response{status: ev.Status, err: fmt.Errorf("bench: %s call: %w", ev.Outcome, errors.Join(ev.Err, sdkErr))},
			cl, ev.Waited, overhead)
		return false
	case transport.Settled, transport.Rejected, transport.Failed:
		if ev.Err != nil {
			p.storeError(ev.Err)
		}
		var body []byte
		if sdkErr != nil {
			body = []byte(sdkErr.Error())
		}
		p.count(response{status: ev.Status, body: body}, cl, ev.Waited, overhead)
		return cl.Retryable()
	default:
		p.count(response{status: ev.Status, err: fmt.Errorf("bench: %s call: %w", ev.Outcome, errors.Join(ev.Err, sdkErr))},
			cl, ev.Waited, overhead)
		return false
	}
}

// vbEstimates compares what the transport estimated with what the
// simulator counted, over the calls that reported their usage.
type vbEstimates struct {
	Calls int64 `json:"calls"`
	// Input: the transport's input estimates and the simulator's counts.
	InputEstimated int64   `json:"input_estimated"`
	InputCounted   int64   `json:"input_counted"`
	InputRatioMin  float64 `json:"input_ratio_min"`
	InputRatioMax  float64 `json:"input_ratio_max"`
	// Output: the output estimate the transport admitted on (Anthropic's
	// output tokens limit; 0 for OpenAI) and the output produced.
	OutputEstimated int64 `json:"output_estimated"`
	OutputCounted   int64 `json:"output_counted"`
}

// add counts one call.
func (e *vbEstimates) add(estIn, in, estOut, out int64) {
	if in <= 0 {
		return
	}
	r := float64(estIn) / float64(in)
	if e.Calls == 0 || r < e.InputRatioMin {
		e.InputRatioMin = r
	}
	if e.Calls == 0 || r > e.InputRatioMax {
		e.InputRatioMax = r
	}
	e.Calls++
	e.InputEstimated += estIn
	e.InputCounted += in
	e.OutputEstimated += estOut
	e.OutputCounted += out
}

// merge adds o to e.
func (e *vbEstimates) merge(o *vbEstimates) {
	if o == nil || o.Calls == 0 {
		return
	}
	if e.Calls == 0 {
		*e = *o
		return
	}
	e.InputRatioMin, e.InputRatioMax = min(e.InputRatioMin, o.InputRatioMin), max(e.InputRatioMax, o.InputRatioMax)
	e.Calls += o.Calls
	e.InputEstimated += o.InputEstimated
	e.InputCounted += o.InputCounted
	e.OutputEstimated += o.OutputEstimated
	e.OutputCounted += o.OutputCounted
}

// estimated records a settled call's estimates against its usage.
func (p *vbProcess) estimated(ev *transport.Event) {
	if ev.Outcome != transport.Settled {
		return
	}
	var estOut int64
	for _, a := range ev.Admitted {
		if a.Metric == vendors.OutputTokens {
			estOut = a.Amount
		}
	}
	p.mu.Lock()
	if p.part.Estimates == nil {
		p.part.Estimates = &vbEstimates{}
	}
	p.part.Estimates.add(ev.Estimate.InputTokens, ev.Usage.Input, estOut, ev.Usage.Output)
	p.mu.Unlock()
}

// timedRoundTripper measures each request's round trip to the vendor, to
// the end of its response body, into the call's vbCallRec.
type timedRoundTripper struct{ base http.RoundTripper }

func (t timedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := callRec(req.Context())
	if rec == nil {
		return t.base.RoundTrip(req)
	}
	rec.mu.Lock()
	rec.start = time.Now()
	rec.mu.Unlock()
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		rec.done()
		return nil, err
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, rec: rec}
	return resp, nil
}

// timedMiddleware is timedRoundTripper as an SDK middleware.
func timedMiddleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	return timedRoundTripper{roundTripFunc(next)}.RoundTrip(req)
}

// roundTripFunc is a function as an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// done records the end of the vendor's part of the call.
func (r *vbCallRec) done() {
	r.mu.Lock()
	if r.vendor == 0 {
		r.vendor = time.Since(r.start)
	}
	r.mu.Unlock()
}

// timedBody ends the vendor's part of a call at its end or its closing.
type timedBody struct {
	io.ReadCloser
	rec *vbCallRec
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.rec.done()
	}
	return n, err
}

func (b *timedBody) Close() error {
	b.rec.done()
	return b.ReadCloser.Close()
}

// parseClients reads --client: transport, manual, or both,
// comma-separated, each at most once.
func parseClients(s string) ([]string, error) {
	var out []string
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		if c != clientTransport && c != clientManual {
			return nil, clikit.Usagef("--client %q: %q is not a client; use transport, manual, or both comma-separated", s, c)
		}
		if slices.Contains(out, c) {
			return nil, clikit.Usagef("--client %q: %s is listed twice", s, c)
		}
		out = append(out, c)
	}
	return out, nil
}

// modeRun is one run of a benchmark: a mode, and for the sluice mode its
// client.
type modeRun struct{ mode, client string }

func (m modeRun) String() string {
	if m.client == "" {
		return m.mode
	}
	return m.mode + " (" + m.client + ")"
}

// runs returns the benchmark's runs in order: the sluice mode once per
// client.
func (c vendorBenchConfig) runs() []modeRun {
	var out []modeRun
	for _, m := range c.modes {
		if m != modeSluice {
			out = append(out, modeRun{mode: m})
			continue
		}
		for _, cl := range c.clients {
			out = append(out, modeRun{mode: m, client: cl})
		}
	}
	return out
}

// label is the report's mode with its client: "sluice (transport)".
func (r *vbReport) label() string {
	return modeRun{mode: r.Mode, client: r.SluiceClient}.String()
}

// writeEstimates prints how the transport's estimates compared with the
// simulator's counts.
func writeEstimates(w io.Writer, e *vbEstimates) {
	if e == nil || e.Calls == 0 || e.InputCounted == 0 {
		return
	}
	fmt.Fprintf(w, "transport's input estimate: %.1f%% of the simulator's count (per call %.1f%% to %.1f%%, %d calls)",
		100*float64(e.InputEstimated)/float64(e.InputCounted), 100*e.InputRatioMin, 100*e.InputRatioMax, e.Calls)
	if e.OutputEstimated > 0 && e.OutputCounted > 0 {
		fmt.Fprintf(w, "; output estimate %.1f%% of the output produced", 100*float64(e.OutputEstimated)/float64(e.OutputCounted))
	}
	fmt.Fprintln(w)
}
