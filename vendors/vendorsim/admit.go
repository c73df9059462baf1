package vendorsim

import "time"

// grant is an admitted request's charges, settled when it completes.
type grant struct {
	input    int64 // prompt tokens (all)
	tokens   int64 // charged to TPM and TPD at admission (OpenAI, Azure)
	uncached int64 // charged to ITPM (Anthropic)
	output   int64 // output tokens debited so far (Anthropic OTPM)
	settled  bool
}

// denial is why a request was rejected with 429.
type denial struct {
	metric    Metric   // the first limit that denied it, the one the body names
	metrics   []Metric // every limit that denied it
	limit     int64    // that limit, in effect
	used      int64    // limit − remaining
	requested int64    // what the request asked of it
	wait      time.Duration
	tooLarge  bool // the request can never be admitted (its charge exceeds the limit)
}

// need returns what the request asks of meter m at admission; 0 on OTPM
// means "a positive balance".
func (g *grant) need(m *meter) int64 {
	switch m.metric {
	case MetricRequests, MetricRequestsPerDay:
		return 1
	case MetricTokens, MetricTokensPerDay:
		return g.tokens
	case MetricInputTokens:
		return g.uncached
	}
	return 0
}

// capacity returns the most meter m can ever admit at once.
func (m *meter) capacity() int64 {
	switch {
	case m.fw != nil:
		return m.fw.limit
	case m.sw != nil:
		return m.sw.limit
	}
	return m.tb.cap.whole
}

// countsFailures reports whether the vendor counts a rejected request
// against its request limit (OpenAI and Azure: "unsuccessful requests
// count"; Anthropic: a 429 consumes nothing).
func (l *limiter) countsFailures() bool { return l.vendor != Anthropic }

// admit decides on a request at now: it charges the limits and returns a
// grant, or returns a denial (having charged only what the vendor charges a
// rejected request).
func (l *limiter) admit(now time.Time, c *call, cacheRead int64) (*grant, *denial) {
	l.advance(now)
	g := &grant{input: c.input}
	switch l.vendor {
	case OpenAI:
		g.tokens = max(c.maxTokens, c.input)
	case Azure:
		g.tokens = c.input + c.maxTokens*c.bestOf
	case Anthropic:
		g.uncached = c.input - cacheRead
	}
	var d *denial
	for _, m := range l.meters {
		n := g.need(m)
		if n > m.capacity() && (m.metric != MetricRequests) {
			d = &denial{metric: m.metric, metrics: []Metric{m.metric}, limit: m.cur, requested: n, tooLarge: true}
			m.denied++
			break
		}
	}
	if d == nil {
		for _, m := range l.meters {
			if n := g.need(m); !m.has(n) {
				if d == nil {
					v := m.view(now)
					d = &denial{metric: m.metric, limit: v.limit, used: v.limit - v.remaining, requested: n}
				}
				d.metrics = append(d.metrics, m.metric)
				m.denied++
			}
		}
	}
	if d == nil {
		for _, m := range l.meters {
			if n := g.need(m); n > 0 {
				m.take(n)
			}
		}
		return g, nil
	}
	if rpm := l.byName[MetricRequests]; rpm != nil && l.countsFailures() {
		rpm.takeFailed()
	}
	if !d.tooLarge {
		for _, m := range l.meters {
			d.wait = max(d.wait, m.waitFor(now, g.need(m)))
		}
	}
	return nil, d
}

// produce debits n output tokens produced by an admitted request
// (Anthropic OTPM counts output as it is produced).
func (l *limiter) produce(now time.Time, g *grant, n int64) {
	l.advance(now)
	g.output += n
	if m := l.byName[MetricOutputTokens]; m != nil {
		m.take(n)
	}
}

// settle adjusts the admission charges of a completed request to its
// actual usage when the limiter adjusts (Rules.Reading): OpenAI's TPM and
// TPD, or Azure's TPM, to prompt + output tokens (a refund never lifts a
// bucket above its capacity, nor a fixed window's count below zero).
// Otherwise the admission charge stays; Anthropic's ITPM estimate is
// already exact and its output was debited as produced.
func (l *limiter) settle(now time.Time, g *grant) {
	if g.settled {
		return
	}
	g.settled = true
	l.advance(now)
	if !l.adjust || l.vendor == Anthropic {
		return
	}
	delta := g.input + g.output - g.tokens
	for _, name := range []Metric{MetricTokens, MetricTokensPerDay} {
		if m := l.byName[name]; m != nil && delta != 0 {
			m.take(delta)
		}
	}
}

// views returns every meter as the headers show it.
func (l *limiter) views(now time.Time) []view {
	out := make([]view, 0, len(l.meters))
	for _, m := range l.meters {
		out = append(out, m.view(now))
	}
	return out
}
