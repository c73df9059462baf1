package vendorsim

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Request headers that steer the simulator.
const (
	// HeaderOutputTokens forces the number of output tokens of a response
	// (still bounded by the request's max tokens).
	HeaderOutputTokens = "X-Vendorsim-Output-Tokens"
	// HeaderCacheReadTokens makes that many of the input tokens cache
	// reads (Anthropic): they appear as cache_read_input_tokens and do not
	// count against ITPM.
	HeaderCacheReadTokens = "X-Vendorsim-Cache-Read-Tokens"
	// HeaderCacheCreationTokens makes that many of the input tokens cache
	// writes (Anthropic): they appear as cache_creation_input_tokens and
	// count against ITPM.
	HeaderCacheCreationTokens = "X-Vendorsim-Cache-Creation-Tokens"
)

// Sim is a simulated vendor API: an http.Handler enforcing one vendor's
// rate-limit rules and accounting for everything it admitted. It is safe
// for concurrent use.
type Sim struct {
	cfg   Config
	clock Clock
	mux   *http.ServeMux

	mu    sync.Mutex
	lim   *limiter
	rng   *rand.Rand
	quota bool
	st    counters
	start time.Time
}

// New returns a Sim for cfg, with full buckets, started at the Clock's
// now. It returns an error matching ErrConfig (a *FieldError naming the
// field) for an invalid configuration.
func New(cfg Config) (*Sim, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = wallClock{}
	}
	if cfg.Organization == "" {
		cfg.Organization = "org-sim"
	}
	if cfg.DefaultMaxTokens == 0 {
		cfg.DefaultMaxTokens = 4096
	}
	if cfg.StreamChunkTokens == 0 {
		cfg.StreamChunkTokens = 1
	}
	if cfg.OutputTokens.zero() {
		cfg.OutputTokens = Fixed(100)
	}
	now := cfg.Clock.Now()
	s := &Sim{cfg: cfg, clock: cfg.Clock, start: now, quota: cfg.QuotaExhausted,
		lim: newLimiter(cfg.Vendor, cfg.Limits, cfg.Rules, now),
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	s.lim.adjust = cfg.Rules.Reading == AdjustedToUsage || cfg.Rules.Reading == VendorReading && cfg.Vendor == OpenAI
	s.st.init(s.lim)
	for _, sc := range cfg.Schedule {
		s.lim.scale(now.Add(sc.At), now.Add(sc.At+sc.For), sc.Factor)
	}
	s.mux = http.NewServeMux()
	if cfg.Vendor == Anthropic {
		s.mux.HandleFunc("POST "+PathMessages, s.handler(apiMessages))
	} else {
		s.mux.HandleFunc("POST "+PathChatCompletions, s.handler(apiChat))
		s.mux.HandleFunc("POST "+PathResponses, s.handler(apiResponses))
		s.mux.HandleFunc("POST "+PathEmbeddings, s.handler(apiEmbeddings))
		if cfg.Vendor == Azure {
			s.mux.HandleFunc("POST /openai/deployments/{deployment}/chat/completions", s.handler(apiChat))
			s.mux.HandleFunc("POST /openai/deployments/{deployment}/embeddings", s.handler(apiEmbeddings))
		}
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("%s %s: not served by this simulator", r.Method, r.URL.Path))
	})
	return s, nil
}

// Vendor returns the vendor the Sim simulates.
func (s *Sim) Vendor() Vendor { return s.cfg.Vendor }

// ServeHTTP implements http.Handler.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// ScaleLimits multiplies every limit by factor (in (0, 100]; each becomes
// max(1, floor(limit × factor))) from now for d, as a shared pool does when
// it is busy; overlapping periods apply the lowest factor. The headers'
// limits show the scaled values. Buckets keep their balance, clamped to a
// lower capacity.
func (s *Sim) ScaleLimits(factor float64, d time.Duration) error {
	if err := (Scale{For: d, Factor: factor}).validate("ScaleLimits"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.lim.scale(now, now.Add(d), factor)
	return nil
}

// SetQuotaExhausted turns the quota-exhausted mode on or off. While on,
// every request gets the vendor's quota error: OpenAI's 429
// insufficient_quota, Anthropic's 429 with error_code
// enforced_spend_limit_reached, neither with retry-after. It counts
// against no limit.
func (s *Sim) SetQuotaExhausted(on bool) {
	s.mu.Lock()
	s.quota = on
	s.mu.Unlock()
}

// outcome is what the locked part of a request decided.
type outcome struct {
	status int // 0: admitted
	d      *denial
	g      *grant
	views  []view
	now    time.Time
	rng    *rand.Rand
	seq    uint64
}

func (s *Sim) handler(a api) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 32<<20))
		if err != nil {
			s.count(func(c *counters) { c.badRequests++ })
			s.writeError(w, http.StatusRequestEntityTooLarge, "request_too_large", "the request body is too large or unreadable")
			return
		}
		c, err := parseCall(a, withModel(body, r.PathValue("deployment")))
		var ctl control
		if err == nil {
			ctl, err = readControl(r.Header, c)
		}
		if err != nil {
			s.count(func(c *counters) { c.badRequests++ })
			s.writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
		if d := s.arrival(); d > 0 && !sleep(r.Context(), d) {
			return
		}
		o := s.decide(c, ctl)
		h := w.Header()
		vs := s.cfg.Rules.headerViews(o.views, o.now.Sub(s.start))
		if s.cfg.Vendor == Anthropic {
			setAnthropicHeaders(h, vs, o.now)
		} else {
			setOpenAIHeaders(h, vs, s.cfg.Vendor == Azure)
		}
		switch {
		case o.status == http.StatusServiceUnavailable || o.status == 529:
			s.writeOverloaded(w, o.status)
		case o.status == http.StatusTooManyRequests && o.d == nil:
			s.writeQuota(w, o.now)
		case o.d != nil:
			s.writeRateLimited(w, c, o.d)
		default:
			x := &exchange{s: s, c: c, g: o.g, ctl: ctl, rng: o.rng, seq: o.seq, created: o.now}
			x.run(r.Context(), w)
		}
	}
}

// arrival draws a request's ArrivalJitter.
func (s *Sim) arrival() time.Duration {
	if s.cfg.ArrivalJitter.zero() {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return seconds(s.cfg.ArrivalJitter.sample(s.rng))
}

// decide is the locked part of a request: faults, then the limits.
func (s *Sim) decide(c *call, ctl control) outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	o := outcome{now: now}
	s.st.requests++
	s.st.seq++
	o.seq = s.st.seq
	fault := s.cfg.ErrorRate > 0 && s.rng.Float64() < s.cfg.ErrorRate
	switch {
	case s.quota:
		s.lim.advance(now)
		o.status = http.StatusTooManyRequests
		s.st.quota++
	case fault:
		s.lim.advance(now)
		o.status = http.StatusServiceUnavailable
		if s.cfg.Vendor == Anthropic {
			o.status = 529
		}
		s.st.overloaded++
	default:
		o.g, o.d = s.lim.admit(now, c, ctl.cacheRead)
		switch {
		case o.d != nil && o.d.tooLarge:
			o.status = http.StatusTooManyRequests
			s.st.tooLarge++
		case o.d != nil:
			o.status = http.StatusTooManyRequests
			s.st.rateLimited++
		default:
			s.st.admitted++
			s.st.inFlight++
			o.rng = rand.New(rand.NewPCG(s.rng.Uint64(), s.rng.Uint64()))
		}
		s.st.record(s, now, o.d)
	}
	o.views = s.lim.views(now)
	return o
}

// count updates the counters under the lock.
func (s *Sim) count(f func(*counters)) {
	s.mu.Lock()
	f(&s.st)
	s.mu.Unlock()
}

// control is what the request headers ask of the simulator.
type control struct {
	output      int64 // -1: draw it
	cacheRead   int64
	cacheCreate int64
}

func readControl(h http.Header, c *call) (control, error) {
	ctl := control{output: -1}
	read := func(name string, into *int64) error {
		v := h.Get(name)
		if v == "" {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 10_000_000 {
			return badRequest("header %s: %q: must be a whole number between 0 and 10000000", name, v)
		}
		*into = n
		return nil
	}
	for _, f := range []struct {
		name string
		into *int64
	}{{HeaderOutputTokens, &ctl.output}, {HeaderCacheReadTokens, &ctl.cacheRead}, {HeaderCacheCreationTokens, &ctl.cacheCreate}} {
		if err := read(f.name, f.into); err != nil {
			return ctl, err
		}
	}
	if c.api != apiMessages && (ctl.cacheRead != 0 || ctl.cacheCreate != 0) {
		return ctl, badRequest("headers %s and %s: apply to the Anthropic Messages API only", HeaderCacheReadTokens, HeaderCacheCreationTokens)
	}
	if ctl.cacheRead+ctl.cacheCreate > c.input {
		return ctl, badRequest("headers %s + %s: %d: more than the %d input tokens", HeaderCacheReadTokens, HeaderCacheCreationTokens,
			ctl.cacheRead+ctl.cacheCreate, c.input)
	}
	return ctl, nil
}

// withModel fills in an Azure deployment as the model when the body names
// none.
func withModel(body []byte, deployment string) []byte {
	if deployment == "" {
		return body
	}
	return injectModel(body, deployment)
}

// sleep waits d or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// seconds converts a drawn latency in seconds to a Duration.
func seconds(v float64) time.Duration {
	if v >= math.MaxInt64/1e9 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(v * 1e9)
}
