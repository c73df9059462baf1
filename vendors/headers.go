package vendors

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseHeaders reads a vendor's rate-limit headers from one response into
// Signals, given now (the time the response arrived; relative resets count
// from it). It reads:
//
//   - OpenAI: x-ratelimit-{limit,remaining,reset}-requests as Requests and
//     -tokens as Tokens, resets as Go-style durations ("6m0s"). Tokens is
//     the most restrictive of three families: -tokens, -project-tokens
//     (a project-scoped token limit) and -tokens_usage_based; the family
//     with the lowest known remaining wins, and its limit and reset come
//     with it.
//   - Azure OpenAI: the same names, resets as bare seconds ("12"). A limit
//     of -1 or 0 (sent when Azure has no value) makes the whole triple
//     unknown; a reset of 0 is unknown, never "reset now".
//   - Groq: the same names, but x-ratelimit-*-requests is requests per day
//     (RequestsPerDay) and -tokens is tokens per minute; durations such as
//     "7.66s" or "2m59.56s".
//   - Anthropic: anthropic-ratelimit-{requests,tokens,input-tokens,
//     output-tokens}-{limit,remaining,reset} as Requests, Tokens (the most
//     restrictive token limit in effect), InputTokens and OutputTokens;
//     resets in RFC 3339; token remainders have a Granularity of 1000. The
//     anthropic-ratelimit-unified-* headers go to Signals.Unified.
//   - OpenRouter: x-ratelimit-{limit,remaining,reset} as Requests (the
//     unsuffixed limit counts requests, not tokens), resets in epoch
//     milliseconds.
//   - ElevenLabs: maximum-concurrent-requests as the Concurrent limit, and
//     the limit minus current-concurrent-requests as its remaining.
//   - Gemini sends no rate-limit headers; only retry-after is read. Its
//     limits come from 429 bodies (Classify).
//   - Any other vendor: the OpenAI names, with ResetAuto.
//
// For every vendor the retry delay comes from retry-after-ms, else
// retry-after (seconds or an HTTP date). A value that is absent, malformed
// or a sentinel is unknown, never zero; the malformed ones are listed in
// Signals.Problems. ParseHeaders never panics and does not keep h.
func ParseHeaders(v Vendor, h http.Header, now time.Time) Signals {
	p := headerParser{h: h, now: now, s: Signals{Vendor: v}}
	p.retryAfter()
	switch v {
	case OpenAI:
		p.openAIStyle(ResetDuration, Requests)
	case Azure:
		p.openAIStyle(ResetSeconds, Requests)
	case Groq:
		p.openAIStyle(ResetDuration, RequestsPerDay)
	case Anthropic:
		p.anthropic()
		p.unified()
	case OpenRouter:
		p.readMetric(Requests, family{"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", ResetEpochMillis, 1})
	case ElevenLabs:
		p.elevenLabs()
	case Gemini:
	default:
		p.openAIStyle(ResetAuto, Requests)
	}
	return p.s
}

// family names the three headers that describe one limit.
type family struct {
	limit, remaining, reset string
	format                  ResetFormat
	granularity             int64
}

type headerParser struct {
	h   http.Header
	now time.Time
	s   Signals
}

// get returns a header's first value, trimmed; "" when absent. It falls back
// to a case-insensitive scan for a header map built by hand.
func (p *headerParser) get(name string) string {
	if v := p.h.Get(name); v != "" {
		return strings.TrimSpace(v)
	}
	for k, vs := range p.h {
		if len(vs) > 0 && strings.EqualFold(k, name) {
			return strings.TrimSpace(vs[0])
		}
	}
	return ""
}

// problem records an unusable value.
func (p *headerParser) problem(field, value, reason string) {
	p.s.Problems = append(p.s.Problems, &ValueError{Field: field, Value: value, Reason: reason})
}

// metric stores a metric's signals when some header for it was present.
func (p *headerParser) metric(m Metric, ms MetricSignals, present bool) {
	if !present {
		return
	}
	if p.s.Metrics == nil {
		p.s.Metrics = make(map[Metric]MetricSignals, 4)
	}
	p.s.Metrics[m] = ms
}

// readMetric reads one family and stores it as m.
func (p *headerParser) readMetric(m Metric, f family) {
	ms, present := p.read(f)
	p.metric(m, ms, present)
}

func (p *headerParser) retryAfter() {
	if v := p.get("retry-after-ms"); v != "" {
		d, err := ParseRetryAfterMs(v)
		if err == nil {
			p.s.RetryAfter = RetryDelay{Delay: d, Known: true, Source: "retry-after-ms"}
			return
		}
		p.problem("retry-after-ms", v, reasonOf(err))
	}
	if v := p.get("retry-after"); v != "" {
		d, err := ParseRetryAfter(v, p.now)
		if err == nil {
			p.s.RetryAfter = RetryDelay{Delay: d, Known: true, Source: "retry-after"}
			return
		}
		p.problem("retry-after", v, reasonOf(err))
	}
}

// read reads one family; present is false when none of its headers was sent.
func (p *headerParser) read(f family) (ms MetricSignals, present bool) {
	lv, rv, tv := p.get(f.limit), p.get(f.remaining), p.get(f.reset)
	if lv == "" && rv == "" && tv == "" {
		return MetricSignals{}, false
	}
	sentinel := false
	if lv != "" {
		n, reason := parseCount(lv)
		switch {
		case reason != "":
			p.problem(f.limit, lv, reason)
		case n <= 0:
			sentinel = true
			p.problem(f.limit, lv, "a limit of "+lv+" is a sentinel for no value; the family is unknown")
		default:
			ms.Limit = Count{Value: n, Known: true, Header: f.limit}
		}
	}
	if rv != "" {
		n, reason := parseCount(rv)
		switch {
		case reason != "":
			p.problem(f.remaining, rv, reason)
		case n < 0:
			p.problem(f.remaining, rv, "negative: a sentinel for no value")
		case sentinel:
			p.problem(f.remaining, rv, "ignored: the limit is a sentinel")
		default:
			ms.Remaining = Count{Value: n, Known: true, Header: f.remaining}
			ms.Granularity = f.granularity
		}
	}
	if tv != "" {
		at, reason := parseReset(f.format, tv, p.now)
		switch {
		case reason == reasonPassed:
			// Well-formed and passed: unknown, but nothing to report.
		case reason != "":
			p.problem(f.reset, tv, reason)
		case sentinel:
			p.problem(f.reset, tv, "ignored: the limit is a sentinel")
		default:
			ms.Reset = Instant{At: at, Known: true, Header: f.reset}
		}
	}
	return ms, true
}

// openAIStyle reads the x-ratelimit-{limit,remaining,reset}-{requests,tokens}
// headers, with requests stored as reqMetric.
func (p *headerParser) openAIStyle(format ResetFormat, reqMetric Metric) {
	fam := func(suffix string) family {
		return family{"x-ratelimit-limit-" + suffix, "x-ratelimit-remaining-" + suffix, "x-ratelimit-reset-" + suffix, format, 1}
	}
	p.readMetric(reqMetric, fam("requests"))
	var best MetricSignals
	found := false
	for _, suffix := range []string{"tokens", "project-tokens", "tokens_usage_based"} {
		ms, present := p.read(fam(suffix))
		if !present {
			continue
		}
		if !found || tighter(ms, best) {
			best, found = ms, true
		}
	}
	p.metric(Tokens, best, found)
}

// tighter reports whether a is more restrictive than b: a lower known
// remaining, or b knowing nothing while a knows something.
func tighter(a, b MetricSignals) bool {
	switch {
	case a.Remaining.Known && b.Remaining.Known:
		return a.Remaining.Value < b.Remaining.Value
	case a.Remaining.Known:
		return true
	case b.Remaining.Known:
		return false
	}
	return a.Known() && !b.Known()
}

func (p *headerParser) anthropic() {
	for _, m := range []struct {
		metric      Metric
		name        string
		granularity int64
	}{
		{Requests, "requests", 1},
		{Tokens, "tokens", 1000},
		{InputTokens, "input-tokens", 1000},
		{OutputTokens, "output-tokens", 1000},
	} {
		pre := "anthropic-ratelimit-" + m.name + "-"
		p.readMetric(m.metric, family{pre + "limit", pre + "remaining", pre + "reset", ResetRFC3339, m.granularity})
	}
}

func (p *headerParser) elevenLabs() {
	const maxH, curH = "maximum-concurrent-requests", "current-concurrent-requests"
	mv, cv := p.get(maxH), p.get(curH)
	if mv == "" && cv == "" {
		return
	}
	var ms MetricSignals
	if mv != "" {
		if n, reason := parseCount(mv); reason != "" || n <= 0 {
			p.problem(maxH, mv, orReason(reason, "not a positive limit"))
		} else {
			ms.Limit = Count{Value: n, Known: true, Header: maxH}
		}
	}
	if cv != "" {
		n, reason := parseCount(cv)
		switch {
		case reason != "" || n < 0:
			p.problem(curH, cv, orReason(reason, "negative"))
		case ms.Limit.Known:
			ms.Remaining = Count{Value: max(ms.Limit.Value-n, 0), Known: true, Header: curH}
			ms.Granularity = 1
		}
	}
	p.metric(Concurrent, ms, true)
}

// reasonOf returns the Reason of a *ValueError, or the error's text.
func reasonOf(err error) string {
	var ve *ValueError
	if errors.As(err, &ve) {
		return ve.Reason
	}
	return err.Error()
}

func orReason(reason, otherwise string) string {
	if reason != "" {
		return reason
	}
	return otherwise
}

// parseCount reads an optionally signed whole number.
func parseCount(v string) (int64, string) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, "out of range"
		}
		return 0, "not a whole number"
	}
	return n, ""
}
