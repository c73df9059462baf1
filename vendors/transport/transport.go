package transport

import (
	"errors"
	"net/http"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/vendors"
)

// Transport is an http.RoundTripper that meters calls to OpenAI, Azure
// OpenAI and Anthropic against a fleet's shared buckets. Give it to an
// official SDK as its HTTP client's transport:
//
//	t, err := transport.New(client, profiles)
//	oc := openai.NewClient(option.WithHTTPClient(&http.Client{Transport: t}))
//	ac := anthropic.NewClient(option.WithHTTPClient(&http.Client{Transport: t}))
//
// For every request to a known endpoint (see ParseEndpoint) of a routed
// host, it reads the request body, estimates the call (see Estimator),
// acquires the profile's admission charges on every dimension at once,
// waiting in line within the request's deadline (Client.SlotMany: the
// tokens are reserved first come, first served, and a wait longer than the
// deadline fails at once), sends the request through the base transport,
// and holds the lease, renewed by its sluice.SlotHandle, while the
// response body is read.
// When the body is read to its end or closed, whichever comes first, it
// settles every token dimension to the usage the response reported (from
// the JSON body, or the stream's final usage event; never below the
// admission charge on a limit the profile reads as vendors.AdmissionKept)
// and releases the lease.
// Every response's rate-limit headers go to a vendors.Reactor (sync, and a
// fleet-wide cooldown after a 429); the 429 itself is returned to the SDK
// unchanged, so that the SDK's own retry loop retries it, each attempt
// acquiring again as the vendor counts each attempt.
//
// A Transport is safe for concurrent use by any number of clients.
type Transport struct {
	base      http.RoundTripper
	client    *sluice.Client
	routes    []Route
	profiles  map[vendors.Vendor]map[string]*entry
	est       Estimator
	unknown   UnknownPolicy
	inject    bool
	idle      time.Duration
	polling   bool
	outEst    func(Estimate) int64
	learnCfg  OutputLearning
	learn     *outputLearner // nil with WithOutputEstimate
	events    EventFunc
	clock     sluice.Clock
	reactOpts []vendors.ReactorOption
	models    ModelPolicy
	aliases   map[string]string         // model → scope (WithModelAliases)
	fallback  map[vendors.Vendor]string // vendor → scope (WithFallbackProfile)
	outCeil   int64                     // the output a request without a maximum may produce
	inCeil    int64                     // the input a request drawing on the vendor's side may have
	stats     stats
}

// entry is one profile with its reactor.
type entry struct {
	p        vendors.Profile
	r        *vendors.Reactor
	requests string // the requests dimension; "" when none
	learns   bool   // a metric charges the output estimate: its outputs are learned
}

// UnknownPolicy says what the Transport does with a request to a routed
// host that it cannot estimate: an endpoint it does not know (listing
// models, files, batches), a body that is not JSON, or a model with no
// profile.
type UnknownPolicy uint8

// The policies.
const (
	// PassThrough sends the request untouched and meters nothing (the
	// default); it is reported as a Passed event and counted
	// (Stats.Passed).
	PassThrough UnknownPolicy = iota
	// CountRequests acquires one request on the vendor's unscoped
	// profile's requests dimension (waiting as for any call) and keeps
	// it; requests with no such profile pass through.
	CountRequests
)

// Option configures a Transport.
type Option func(*Transport)

// WithBase sets the transport requests are sent through (default
// http.DefaultTransport).
func WithBase(rt http.RoundTripper) Option { return func(t *Transport) { t.base = rt } }

// WithRoute adds a route, checked before the default ones in the order
// given: use it for a custom base URL (a proxy, a gateway, the simulator).
func WithRoute(r Route) Option { return func(t *Transport) { t.routes = append(t.routes, r) } }

// WithUnknownEndpoints sets the policy for requests the Transport cannot
// estimate (default PassThrough).
func WithUnknownEndpoints(p UnknownPolicy) Option { return func(t *Transport) { t.unknown = p } }

// WithoutUsageInjection stops the Transport from adding
// "stream_options": {"include_usage": true} to streamed chat completion
// requests that lack it (it never overrides an include_usage the request
// sets, nor adds it for an Azure api-version before 2024-09-01-preview,
// which refuses stream_options). Such a stream then reports no usage, and the call
// settles from the estimate and the streamed text, never below the
// admission charge (Partial).
func WithoutUsageInjection() Option { return func(t *Transport) { t.inject = false } }

// WithBodyTimeout sets how long a response body may go unread (no Read in
// progress, none returned) before the Transport settles it at what it has
// seen, never below the admission charge, releases its lease and closes
// the vendor's response (a later Read returns an error): a body never read
// nor closed holds neither a lease nor a connection for ever. The default
// is the Client's lease TTL. The request's context ending settles and
// releases at once.
func WithBodyTimeout(d time.Duration) Option { return func(t *Transport) { t.idle = d } }

// WithPolling makes the Transport wait for its charges as the Client's
// sluice.WithPolling does: ask, sleep the RETRY_IN answer plus jitter, ask
// again, until granted or the request's deadline (or, without one, the
// Client's DefaultSlotTimeout) has passed. It holds no place in line:
// while other callers reserve the same dimensions, a polling call is
// granted only what is left after their reservations. Without it the Transport waits in line (the
// Client's Wait: tokens reserved first come, first served, concurrent
// slots queued for).
func WithPolling() Option { return func(t *Transport) { t.polling = true } }

// WithOutputEstimate sets the output a call is expected to produce, for
// Anthropic's output-tokens limit, which admits on a positive balance and
// counts output as produced (see vendors.AdmitOutputEstimate), in place of
// the estimate learned from the responses (see OutputLearning).
// FixedOutputEstimate is the estimate Transports used before they learned.
func WithOutputEstimate(f func(Estimate) int64) Option { return func(t *Transport) { t.outEst = f } }

// FixedOutputEstimate returns min(max_tokens, 1024), or 1024 when the
// request sets no maximum: a fixed output estimate for WithOutputEstimate.
func FixedOutputEstimate(e Estimate) int64 {
	if e.MaxOutputTokens > 0 {
		return min(e.MaxOutputTokens, 1024)
	}
	return 1024
}

// WithEstimator sets the Estimator (default the zero Estimator).
func WithEstimator(e Estimator) Option { return func(t *Transport) { t.est = e } }

// WithEvents sets the function every finished call is reported to, every
// pass-through to a routed vendor host included. A panic in f is recovered
// and logged (see Stats.EventPanics).
func WithEvents(f EventFunc) Option { return func(t *Transport) { t.events = f } }

// WithClock sets the clock deadlines are measured with and the Reactors
// read responses' arrival times from; use the Client's (sluice.WithClock)
// in tests. The default is the system clock.
func WithClock(c sluice.Clock) Option { return func(t *Transport) { t.clock = c } }

// WithReactorOptions passes options to every profile's vendors.Reactor,
// e.g. vendors.WithoutSync().
func WithReactorOptions(opts ...vendors.ReactorOption) Option {
	return func(t *Transport) { t.reactOpts = append(t.reactOpts, opts...) }
}

// ErrNoProfile is matched by the error New returns when given no profile.
var ErrNoProfile = errors.New("transport: no profile")

// New returns a Transport that meters calls through c with profiles: one
// per vendor and scope. A request's profile is the one of its vendor whose
// Scope is the request's model (or Azure deployment), else the one with an
// empty Scope. Profiles' buckets must exist (Profile.Buckets, or a limits
// file's presets, whose File.Profiles gives the profiles). Two profiles of
// the same vendor and scope are refused with a *bucket.FieldError naming
// the scope.
func New(c *sluice.Client, profiles []vendors.Profile, opts ...Option) (*Transport, error) {
	if c == nil {
		return nil, &bucket.FieldError{Field: "client", Value: nil, Reason: "must not be nil"}
	}
	if len(profiles) == 0 {
		return nil, ErrNoProfile
	}
	t := &Transport{client: c, base: http.DefaultTransport, inject: true, clock: systemClock{},
		profiles: map[vendors.Vendor]map[string]*entry{}}
	for _, o := range opts {
		o(t)
	}
	if t.idle <= 0 {
		t.idle = c.Config().LeaseTTL
	}
	ropts := append([]vendors.ReactorOption{vendors.WithReactorClock(t.clock)}, t.reactOpts...)
	for _, p := range profiles {
		byScope := t.profiles[p.Vendor]
		if byScope == nil {
			byScope = map[string]*entry{}
			t.profiles[p.Vendor] = byScope
		}
		if _, dup := byScope[p.Scope]; dup {
			return nil, &bucket.FieldError{Field: "profiles[" + string(p.Vendor) + "].scope", Value: p.Scope, Reason: "is given twice"}
		}
		e := &entry{p: p, r: vendors.NewReactor(c, p, ropts...)}
		e.requests, _ = p.Dimension(vendors.Requests)
		for _, mc := range p.Cost.Metrics {
			if _, ok := p.Dimension(mc.Metric); ok && (mc.Admit == vendors.AdmitOutputEstimate || mc.Admit == vendors.AdmitMaxOutput) {
				e.learns = true
			}
		}
		byScope[p.Scope] = e
	}
	for i, r := range t.routes {
		if err := r.validate(i); err != nil {
			return nil, err
		}
	}
	if err := t.validateFallbacks(); err != nil {
		return nil, err
	}
	if t.outCeil <= 0 {
		t.outCeil = DefaultOutputCeiling
	}
	if t.inCeil <= 0 {
		t.inCeil = DefaultInputCeiling
	}
	if t.outEst == nil {
		t.learn = newOutputLearner(t.learnCfg)
	}
	t.routes = append(t.routes, defaultRoutes...)
	return t, nil
}

// outputEstimate returns the output to charge a call with estimate e to
// vendor v: the WithOutputEstimate function's, else the learned one.
func (t *Transport) outputEstimate(v vendors.Vendor, e Estimate) int64 {
	if t.outEst != nil {
		return max(0, t.outEst(e))
	}
	return t.learn.estimate(v, e)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
