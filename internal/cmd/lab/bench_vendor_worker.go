package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// The modes of 'sluice-lab bench --vendor-sim'.
const (
	modeSluice = "sluice"
	modeNaive  = "naive"
	modeLocal  = "local"
)

// vbRun is what one process of a vendor benchmark run needs; the parent
// passes it to each child as JSON.
type vbRun struct {
	Mode     string           `json:"mode"`
	Vendor   vendorsim.Vendor `json:"vendor"`
	URL      string           `json:"url"`
	Limits   vendorsim.Limits `json:"limits"`
	Headroom float64          `json:"headroom"`
	// RequestMargin is the profile's arrival margin in ms; nil is the
	// default (vendors.DefaultRequestMargin).
	RequestMargin *int64        `json:"request_margin_ms,omitempty"`
	Process       int           `json:"process"`
	Processes     int           `json:"processes"`
	Workers       int           `json:"workers"`
	Duration      time.Duration `json:"duration"`
	Load          string        `json:"load"`
	Sync          bool          `json:"sync"`
	Follow        bool          `json:"follow"`
	EstimateError float64       `json:"estimate_error"`
	Dists         dists         `json:"dists"`
	Seed          uint64        `json:"seed"`
	Client        string        `json:"client,omitempty"` // sluice mode: transport (the default) or manual
	// CostReading is the profile's reading of its token charges; "" is
	// the vendor's default.
	CostReading string `json:"cost_reading,omitempty"`
	// OutputEstimate is the transport's output estimate: "" or learned,
	// or fixed.
	OutputEstimate string `json:"output_estimate,omitempty"`
}

// The transport's output estimates (--output-estimate).
const (
	outputLearned = "learned"
	outputFixed   = "fixed"
)

// outputOption returns the transport option for --output-estimate:
// learned (the default learning), learned:Q (the Q quantile) or fixed.
func outputOption(s string) (transport.Option, error) {
	switch {
	case s == "" || s == outputLearned:
		return transport.WithOutputLearning(transport.DefaultOutputLearning), nil
	case s == outputFixed:
		return transport.WithOutputEstimate(transport.FixedOutputEstimate), nil
	}
	if q, ok := strings.CutPrefix(s, outputLearned+":"); ok {
		v, err := strconv.ParseFloat(q, 64)
		if err == nil && v > 0 && v <= 1 {
			l := transport.DefaultOutputLearning
			l.Quantile = v
			return transport.WithOutputLearning(l), nil
		}
	}
	return nil, clikit.Usagef("--output-estimate %q: must be learned, learned:Q (0 < Q ≤ 1) or fixed", s)
}

// benchScope scopes the benchmark's dimensions (openai#bench#tpm), so that
// they never drain a production bucket of the same store.
const benchScope = "bench"

// profile returns the Sluice profile for the run's published limits.
func (r vbRun) profile() (vendors.Profile, error) {
	h, m := vendors.WithHeadroom(r.Headroom), vendors.WithRequestMargin(vendors.DefaultRequestMargin)
	if r.RequestMargin != nil {
		m = vendors.WithRequestMargin(time.Duration(*r.RequestMargin) * time.Millisecond)
	}
	var cr vendors.ProfileOption
	if r.CostReading != "" {
		rd, ok := vendors.ParseReading(r.CostReading)
		if !ok {
			return vendors.Profile{}, clikit.Usagef("--cost-reading %q: must be adjusted_to_usage or admission_kept", r.CostReading)
		}
		cr = vendors.WithCostReading(rd)
	}
	switch r.Vendor {
	case vendorsim.OpenAI:
		return vendors.OpenAIProfile(vendors.OpenAILimits{Model: benchScope, RPM: r.Limits.RPM, TPM: r.Limits.TPM}, h, m, cr)
	case vendorsim.Anthropic:
		return vendors.AnthropicProfile(vendors.AnthropicLimits{Model: benchScope, RPM: r.Limits.RPM,
			InputTPM: r.Limits.ITPM, OutputTPM: r.Limits.OTPM}, h, m, cr)
	case vendorsim.Azure:
		return vendors.AzureProfile(vendors.AzureLimits{Deployment: benchScope, TPM: r.Limits.TPM, RPM: r.Limits.RPM}, h, m, cr)
	}
	return vendors.Profile{}, clikit.Usagef("--vendor-sim %q: must be openai, anthropic or azure", r.Vendor)
}

// vbPart is one process's account of a run. Durations are in microseconds.
type vbPart struct {
	Calls       int64   `json:"calls"` // HTTP requests sent
	OK          int64   `json:"ok"`
	RateLimited int64   `json:"rate_limited"` // retryable 429s
	TooLarge    int64   `json:"too_large"`
	Quota       int64   `json:"quota"`
	Other       int64   `json:"other"`     // other statuses, transport errors
	Abandoned   int64   `json:"abandoned"` // requests still waiting when the run ended
	Added       []int64 `json:"added_us"`  // per HTTP request: time spent outside the vendor call
	Waited      []int64 `json:"waited_us"` // the part of Added spent waiting for a slot or a retry
	Overhead    []int64 `json:"overhead_us"`
	Cooled      int64   `json:"cooled"`
	Synced      int64   `json:"synced"`
	Resized     int64   `json:"resized"`
	StoreErrors int64   `json:"store_errors"`
	FirstErr    string  `json:"first_error,omitempty"`
	// Estimates compares the transport client's estimates with the
	// simulator's counts; nil for the other clients.
	Estimates *vbEstimates `json:"estimates,omitempty"`
}

// merge adds o to p.
func (p *vbPart) merge(o *vbPart) {
	p.Calls += o.Calls
	p.OK += o.OK
	p.RateLimited += o.RateLimited
	p.TooLarge += o.TooLarge
	p.Quota += o.Quota
	p.Other += o.Other
	p.Abandoned += o.Abandoned
	p.Added = append(p.Added, o.Added...)
	p.Waited = append(p.Waited, o.Waited...)
	p.Overhead = append(p.Overhead, o.Overhead...)
	p.Cooled += o.Cooled
	p.Synced += o.Synced
	p.Resized += o.Resized
	p.StoreErrors += o.StoreErrors
	if p.FirstErr == "" {
		p.FirstErr = o.FirstErr
	}
	if o.Estimates != nil {
		if p.Estimates == nil {
			p.Estimates = &vbEstimates{}
		}
		p.Estimates.merge(o.Estimates)
	}
}

// vbProcess runs one process's workers for one mode.
type vbProcess struct {
	run     vbRun
	prof    vendors.Profile
	http    *http.Client
	client  *sluice.Client   // sluice mode
	reactor *vendors.Reactor // sluice mode
	local   []*localDim      // local mode, in the order of prof.Dimensions
	tr      *vbTransport     // sluice mode through the transport

	mu   sync.Mutex
	part vbPart
}

// newVBProcess prepares a process: c is the store's client in sluice mode,
// nil otherwise.
func newVBProcess(run vbRun, c *sluice.Client) (*vbProcess, error) {
	prof, err := run.profile()
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: run.Workers + 1, IdleConnTimeout: time.Minute}
	p := &vbProcess{run: run, prof: prof, http: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
	switch run.Mode {
	case modeSluice:
		if c == nil {
			return nil, errors.New("bench: sluice mode needs a store")
		}
		var opts []vendors.ReactorOption
		if !run.Sync {
			opts = append(opts, vendors.WithoutSync())
		}
		if !run.Follow {
			opts = append(opts, vendors.WithoutLimitFollowing())
		}
		p.client, p.reactor = c, vendors.NewReactor(c, prof, opts...)
		if run.Client != clientManual {
			if p.tr, err = newVBTransport(p, c); err != nil {
				return nil, err
			}
		}
	case modeLocal:
		for _, d := range prof.Dimensions {
			p.local = append(p.local, newLocalDim(d, run.Processes))
		}
	case modeNaive:
	default:
		return nil, clikit.Usagef("--modes: %q: must be sluice, naive or local", run.Mode)
	}
	return p, nil
}

// runWorkers runs the workers from start for the run's duration and
// returns the process's account. Requests in flight at the end complete.
func (p *vbProcess) runWorkers(ctx context.Context, start time.Time) (*vbPart, error) {
	plans, err := planLoad(p.run.Load, p.run.Process, p.run.Processes, p.run.Workers, p.run.Duration, p.run.Seed)
	if err != nil {
		return nil, err
	}
	gens := make([]*reqGen, p.run.Workers)
	for i := range gens {
		stream := uint64(p.run.Process*p.run.Workers + i)
		if gens[i], err = newReqGen(p.run.Vendor, p.run.Dists, p.run.EstimateError, p.run.Seed, stream); err != nil {
			return nil, err
		}
	}
	rctx, cancel := context.WithDeadline(ctx, start.Add(p.run.Duration))
	defer cancel()
	errs := make([]error, p.run.Workers)
	var wg sync.WaitGroup
	for i := range p.run.Workers {
		wg.Go(func() { errs[i] = p.worker(rctx, start, plans[i], gens[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &p.part, nil
}

// worker calls the vendor while its plan says so, until rctx is done.
func (p *vbProcess) worker(rctx context.Context, start time.Time, plan workerPlan, gen *reqGen) error {
	for rctx.Err() == nil {
		active, wait := plan.at(time.Since(start))
		if !active {
			if wait < 0 {
				return nil
			}
			_ = clikit.SleepCtx(rctx, wait)
			continue
		}
		c, err := gen.next()
		if err != nil {
			return err
		}
		switch p.run.Mode {
		case modeSluice:
			if p.tr != nil {
				p.tr.call(rctx, c)
			} else {
				p.sluiceCall(rctx, c)
			}
		case modeLocal:
			p.localCall(rctx, c)
		default:
			p.naiveCall(rctx, c)
		}
	}
	return nil
}

// response is what a vendor call returned.
type response struct {
	status int
	header http.Header
	body   []byte
	usage  vendors.Usage
	err    error
}

// send makes one HTTP request to the simulator, telling it the output
// length. It is not cancelled when the run ends: a request sent completes.
func (p *vbProcess) send(ctx context.Context, c genCall) response {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	path := vendorPath(p.run.Vendor)
	if p.run.Vendor == vendorsim.Azure {
		path += "?api-version=" + azureAPIVersion
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.run.URL+path, bytes.NewReader(c.Body))
	if err != nil {
		return response{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(vendorsim.HeaderOutputTokens, fmt.Sprint(c.Output))
	res, err := p.http.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	r := response{status: res.StatusCode, header: res.Header, body: body, err: err}
	if err == nil && r.status >= 200 && r.status < 300 {
		r.usage, r.err = parseUsage(body)
	}
	return r
}

// parseUsage reads the usage of an OpenAI chat completion or an Anthropic
// message.
func parseUsage(body []byte) (vendors.Usage, error) {
	var v struct {
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
			InputTokens      int64 `json:"input_tokens"`
			OutputTokens     int64 `json:"output_tokens"`
			CacheCreation    int64 `json:"cache_creation_input_tokens"`
			CacheRead        int64 `json:"cache_read_input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return vendors.Usage{}, fmt.Errorf("bench: reading a response's usage: %w", err)
	}
	u := v.Usage
	return vendors.Usage{Input: u.PromptTokens + u.InputTokens, Output: u.CompletionTokens + u.OutputTokens,
		CacheCreation: u.CacheCreation, CacheRead: u.CacheRead}, nil
}

// count records one HTTP request's outcome and the time spent outside the
// vendor call: waited waiting for a slot or a retry, overhead the rest.
func (p *vbProcess) count(r response, cl vendors.Classification, waited, overhead time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pt := &p.part
	pt.Calls++
	switch {
	case r.err != nil:
		pt.Other++
		p.noteLocked(r.err)
	case cl.Kind == vendors.OK:
		pt.OK++
	case cl.Kind == vendors.RateLimited:
		pt.RateLimited++
	case cl.Kind == vendors.TooLarge:
		pt.TooLarge++
	case cl.Kind == vendors.QuotaExhausted:
		pt.Quota++
	default:
		pt.Other++
		p.noteLocked(fmt.Errorf("vendor answered %d: %s", r.status, bytes.TrimSpace(r.body)))
	}
	pt.Added = append(pt.Added, (waited + overhead).Microseconds())
	pt.Waited = append(pt.Waited, waited.Microseconds())
	pt.Overhead = append(pt.Overhead, overhead.Microseconds())
}

func (p *vbProcess) noteLocked(err error) {
	if p.part.FirstErr == "" {
		p.part.FirstErr = err.Error()
	}
}

// storeError records a store failure.
func (p *vbProcess) storeError(err error) {
	p.mu.Lock()
	p.part.StoreErrors++
	p.noteLocked(err)
	p.mu.Unlock()
}

func (p *vbProcess) abandoned() {
	p.mu.Lock()
	p.part.Abandoned++
	p.mu.Unlock()
}

// classify reads a response as the vendor's signals say.
func (p *vbProcess) classify(r response) vendors.Classification {
	return vendors.Classify(vendors.Vendor(p.run.Vendor), r.status, r.header, r.body, time.Now())
}

// retryDelay is how long a naive caller waits after a retryable 429: the
// vendor's retry-after, or a second when it gives none.
func retryDelay(cl vendors.Classification) time.Duration {
	if cl.RetryAfter.Known {
		return cl.RetryAfter.Delay
	}
	return time.Second
}

// naiveCall sends c, and on a retryable 429 waits the vendor's retry-after
// and sends it again, until the run ends.
func (p *vbProcess) naiveCall(rctx context.Context, c genCall) {
	var waited time.Duration
	for {
		r := p.send(rctx, c)
		cl := p.classify(r)
		p.count(r, cl, waited, 0)
		if r.err != nil || !cl.Retryable() {
			return
		}
		waited = retryDelay(cl)
		if clikit.SleepCtx(rctx, waited) != nil {
			p.abandoned()
			return
		}
	}
}

// sluiceCall acquires the profile's dimensions all-or-nothing at the cost
// model's admission charge (waiting out RETRY_IN until the run ends),
// sends c, settles each dimension to the usage the response reports,
// releases the lease and passes the response to the Reactor. A retryable
// 429 starts over: the Reactor has cooled the fleet down.
func (p *vbProcess) sluiceCall(rctx context.Context, c genCall) {
	charges, err := p.prof.Admission(vendors.Call{InputTokens: c.EstInput, MaxOutputTokens: c.MaxTokens, OutputEstimate: c.EstOutput})
	if err != nil {
		p.storeError(err)
		return
	}
	reqs := make([]sluice.Request, len(charges))
	for i, ch := range charges {
		reqs[i] = sluice.Request{Dimension: ch.Dimension, Cost: ch.Amount}
	}
	for {
		t0 := time.Now()
		dl, _ := rctx.Deadline()
		// The run's end (the context's deadline) ends the wait.
		lease, err := p.client.Wait(rctx, reqs)
		if err != nil {
			// The run ended while waiting (a store call may report the
			// deadline before the context's timer fires).
			if rctx.Err() != nil || !time.Now().Before(dl) || errors.Is(err, sluice.ErrSlotTimeout) {
				p.abandoned()
			} else {
				p.storeError(err)
			}
			return
		}
		waited := time.Since(t0)
		r := p.send(rctx, c)
		t2 := time.Now()
		bg, cancel := context.WithTimeout(context.WithoutCancel(rctx), 30*time.Second)
		p.finish(bg, lease, charges, r)
		cl, err := p.observe(bg, r)
		cancel()
		if err != nil {
			p.storeError(err)
		}
		p.count(r, cl, waited, time.Since(t2))
		if r.err != nil || !cl.Retryable() {
			return
		}
	}
}

// finish settles the lease to the response's usage (nothing used for a
// failure the vendor did not count) and releases it. A transport error
// keeps the estimate: the vendor may have counted it.
func (p *vbProcess) finish(ctx context.Context, l *sluice.Lease, charges []vendors.Charge, r response) {
	if r.err == nil {
		settled, err := p.prof.Settle(charges, r.usage)
		if err != nil {
			p.storeError(err)
		}
		for _, s := range settled {
			if _, err := l.Settle(ctx, s.Dimension, s.Amount); err != nil {
				p.storeError(err)
			}
		}
	}
	if err := l.Release(ctx); err != nil {
		p.storeError(err)
	}
}

// observe passes a response to the Reactor and counts what it did.
func (p *vbProcess) observe(ctx context.Context, r response) (vendors.Classification, error) {
	if r.err != nil {
		return vendors.Classification{}, nil
	}
	re, err := p.reactor.Observe(ctx, r.status, r.header, r.body)
	p.mu.Lock()
	p.part.Cooled += int64(len(re.Cooled))
	p.part.Synced += int64(len(re.Synced))
	p.part.Resized += int64(len(re.Resized))
	p.mu.Unlock()
	return re.Classification, err
}
