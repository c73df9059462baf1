package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/vendors"
)

// finishTimeout bounds the store calls that settle and release a call,
// which run even when the request's context is already done.
const finishTimeout = 10 * time.Second

// call is one metered request, from its acquisition to its settlement.
type call struct {
	t        *Transport
	e        *entry
	ctx      context.Context // the request's
	ev       Event
	h        *sluice.SlotHandle // renews the lease until finish releases it
	lease    *sluice.Lease      // h's
	once     sync.Once
	done     atomic.Bool
	period   time.Duration
	body     atomic.Pointer[body]
	mu       sync.Mutex // guards timer, stopCtx, extraErr and sent
	timer    *time.Timer
	stopCtx  func() bool
	extraErr []error
	inCap    int64 // the most input tokens the request could hold
	capped   atomic.Bool
	sent     time.Time // when the request was handed on (guarded by mu); zero before
}

// hold takes h, which renews the lease until the call finishes, and starts
// the timer that, once a body is attached, finishes the call when the body
// has gone unread for the body timeout.
func (c *call) hold(h *sluice.SlotHandle) {
	c.h, c.lease = h, h.Lease()
	c.period = max(time.Millisecond, c.t.idle/4)
	c.mu.Lock()
	c.timer = time.AfterFunc(c.period, c.tick)
	c.mu.Unlock()
}

// watch finishes b when the request's context ends.
func (c *call) watch(b *body) {
	c.mu.Lock()
	c.stopCtx = context.AfterFunc(c.ctx, func() { b.finish(context.Cause(c.ctx)) })
	c.mu.Unlock()
}

func (c *call) tick() {
	if c.done.Load() {
		return
	}
	if b := c.body.Load(); b != nil && b.idleFor() >= c.t.idle {
		b.timeout()
		return
	}
	c.mu.Lock()
	if !c.done.Load() {
		c.timer.Reset(c.period)
	}
	c.mu.Unlock()
}

// ErrBodyTimeout is matched by an Event's Err when a response body went
// unread for the body timeout (see WithBodyTimeout) and was settled then.
var ErrBodyTimeout = errors.New("transport: response body unread for the body timeout")

func (c *call) addErr(err error) {
	c.mu.Lock()
	c.extraErr = append(c.extraErr, err)
	c.mu.Unlock()
}

// finish settles the lease for outcome o, releases it and reports the
// event; it runs once, and later calls wait for the first to return.
func (c *call) finish(o Outcome, u vendors.Usage, complete func() []vendors.Charge, err error) {
	c.once.Do(func() {
		c.mu.Lock()
		sent := c.sent
		c.done.Store(true)
		if c.timer != nil {
			c.timer.Stop()
		}
		if c.stopCtx != nil {
			c.stopCtx()
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), finishTimeout)
		defer cancel()
		capped := c.capUsage(ctx, u)
		if o == Settled && c.t.learn != nil && c.e.learns {
			c.t.learn.add(c.ev.Vendor, c.ev.Model, capped.Output)
		}
		final, serr := c.final(o, capped, complete)
		errs := []error{err, serr}
		for _, ch := range final {
			if c.concurrent(ch.Dimension) || ch.Amount == c.lease.Cost(ch.Dimension) {
				continue
			}
			if _, err := c.lease.Settle(ctx, ch.Dimension, ch.Amount); err != nil {
				errs = append(errs, fmt.Errorf("transport: settling %s to %d: %w", ch.Dimension, ch.Amount, err))
			}
		}
		if context.Cause(c.h.Context()) == sluice.ErrLeaseLost {
			// The handle gave the lease up: it expired or was reclaimed,
			// or could not be renewed in time.
			errs = append(errs, fmt.Errorf("transport: renewing the lease: %w", sluice.ErrLeaseLost))
		}
		if err := c.h.Release(ctx); err != nil {
			errs = append(errs, fmt.Errorf("transport: releasing the lease: %w", err))
		}
		c.mu.Lock()
		errs = append(errs, c.extraErr...)
		c.mu.Unlock()
		c.ev.Outcome, c.ev.Usage, c.ev.Err = o, u, errors.Join(errs...)
		if !sent.IsZero() {
			c.ev.Duration = c.t.clock.Now().Sub(sent)
		}
		c.ev.Final = make([]vendors.Charge, len(c.ev.Admitted))
		for i, a := range c.ev.Admitted {
			a.Amount = c.lease.Cost(a.Dimension)
			c.ev.Final[i] = a
		}
		c.t.emit(c.ctx, c.ev)
	})
}

// final returns what each admitted dimension should be left at.
func (c *call) final(o Outcome, u vendors.Usage, partial func() []vendors.Charge) ([]vendors.Charge, error) {
	adm := c.ev.Admitted
	out := append([]vendors.Charge(nil), adm...)
	switch o {
	case Settled:
		targets, err := c.e.p.Settle(adm, u)
		if err != nil {
			return out, err
		}
		apply(out, targets, false)
	case Partial:
		if partial != nil {
			apply(out, partial(), true)
		}
	case Refunded:
		for i := range out {
			out[i].Amount = 0
		}
	case Rejected:
		for i := range out {
			keep := c.e.p.Vendor != vendors.Anthropic && (out[i].Metric == vendors.Requests || out[i].Metric == vendors.RequestsPerDay)
			if !keep {
				out[i].Amount = 0
			}
		}
	}
	return out, nil
}

// apply sets each charge in out that targets names to the target amount,
// or to the larger of the two when floor is set.
func apply(out, targets []vendors.Charge, floor bool) {
	for _, tg := range targets {
		for i := range out {
			if out[i].Dimension != tg.Dimension {
				continue
			}
			if floor {
				out[i].Amount = max(out[i].Amount, tg.Amount)
			} else {
				out[i].Amount = tg.Amount
			}
		}
	}
}

func (c *call) concurrent(dim string) bool {
	for _, d := range c.e.p.Dimensions {
		if d.Name == dim {
			return d.Config.Type == bucket.Concurrent
		}
	}
	return false
}

// partialSettle returns the settlement of a call whose usage is partly
// known: the input as reported, else as estimated; the output as reported
// or as read from the streamed text, whichever is larger.
func (c *call) partialSettle(u vendors.Usage, haveIn bool, streamed int64) []vendors.Charge {
	if !haveIn {
		u.Input = c.ev.Estimate.InputTokens
	}
	u.Output = max(u.Output, streamed)
	u.CacheRead = min(u.CacheRead, u.Input)
	u = c.capUsage(c.ctx, u)
	targets, err := c.e.p.Settle(c.ev.Admitted, u)
	if err != nil {
		return nil
	}
	return targets
}

// DefaultOutputCeiling is the most output tokens a request that sets no
// maximum (max_tokens, max_completion_tokens, max_output_tokens) is
// settled at, per completion: the largest output the vendors' models
// produce.
const DefaultOutputCeiling = 128 << 10

// DefaultInputCeiling is the most input tokens a request that may draw
// content from the vendor's side (an earlier response, a stored file, a
// server-side tool's results) is settled at: the largest context window
// of the vendors' models.
const DefaultInputCeiling = 2 << 20

// WithInputCeiling sets the most input tokens a request that may draw
// content from the vendor's side is settled at (default
// DefaultInputCeiling).
func WithInputCeiling(n int64) Option { return func(t *Transport) { t.inCeil = n } }

// serverSide are the request fields through which a vendor adds content
// that the body does not hold: the Responses API's previous_response_id
// and conversation, stored files, server-side tools (web search, web
// fetch, file search, code execution, MCP) and documents fetched by URL.
var serverSide = [][]byte{[]byte(`"previous_response_id"`), []byte(`"conversation"`), []byte(`file_id`),
	[]byte(`web_search`), []byte(`web_fetch`), []byte(`file_search`), []byte(`code_interpreter`), []byte(`code_execution`),
	[]byte(`mcp`), []byte(`"url"`), []byte(`"container"`), []byte(`"prompt"`)}

// inputCap returns the most input tokens a request with body raw could
// hold: its size in bytes (a token is at least one byte of text) plus the
// estimate (images, overheads) plus inputSlack; the input ceiling when it
// may draw content from the vendor's side.
func (t *Transport) inputCap(raw []byte, est Estimate) int64 {
	for _, m := range serverSide {
		if bytes.Contains(raw, m) {
			return max(t.inCeil, int64(len(raw))+est.InputTokens+inputSlack)
		}
	}
	return int64(len(raw)) + est.InputTokens + inputSlack
}

// inputSlack is what a vendor may add to a request's prompt beyond its
// body (system prompts for tools, message framing), in tokens.
const inputSlack = 4096

// WithOutputCeiling sets the most output tokens, per completion, that a
// request setting no maximum is settled at (default DefaultOutputCeiling).
func WithOutputCeiling(n int64) Option { return func(t *Transport) { t.outCeil = n } }

// capUsage caps u at what the call could have used: output at the
// request's maximum (or the output ceiling) times its completions; input,
// cache reads and cache writes each at what its body could hold (see
// inputCap). A capped usage is an anomaly: it is logged
// once per call as "transport.usage_capped", counted (Stats.UsageCapped)
// and flagged on the Event; the excess is never charged.
func (c *call) capUsage(ctx context.Context, u vendors.Usage) vendors.Usage {
	est := c.ev.Estimate
	n := max(est.N, 1)
	perCall := est.MaxOutputTokens
	if perCall <= 0 {
		perCall = c.t.outCeil
	}
	outMax := perCall * n
	if perCall > math.MaxInt64/n {
		outMax = math.MaxInt64
	}
	out := u
	out.Output = min(u.Output, outMax)
	if c.inCap > 0 {
		out.Input = min(u.Input, c.inCap)
		out.CacheRead = min(u.CacheRead, c.inCap)
		out.CacheCreation = min(u.CacheCreation, c.inCap)
	}
	if out == u {
		return u
	}
	if c.capped.CompareAndSwap(false, true) {
		c.t.stats.capped.Add(1)
		c.t.client.Logger().LogAttrs(ctx, slog.LevelWarn, "transport.usage_capped",
			slog.String("vendor", string(c.ev.Vendor)), slog.String("model", c.ev.Model),
			slog.Int64("input", u.Input), slog.Int64("input_cap", c.inCap),
			slog.Int64("output", u.Output), slog.Int64("output_cap", outMax))
	}
	c.ev.UsageCapped = true
	return out
}
