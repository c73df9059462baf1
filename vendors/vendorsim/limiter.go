package vendorsim

import (
	"math"
	"slices"
	"time"
)

// Metric names what a limit counts, as the vendors' headers name it.
type Metric string

// The metrics a Sim enforces.
const (
	MetricRequests       Metric = "requests"         // RPM
	MetricTokens         Metric = "tokens"           // OpenAI and Azure TPM
	MetricInputTokens    Metric = "input_tokens"     // Anthropic ITPM
	MetricOutputTokens   Metric = "output_tokens"    // Anthropic OTPM
	MetricRequestsPerDay Metric = "requests_per_day" // OpenAI RPD
	MetricTokensPerDay   Metric = "tokens_per_day"   // OpenAI TPD
)

// meter is one enforced limit: a token bucket or a fixed window.
type meter struct {
	metric  Metric
	base    int64 // the configured limit, per minute or per day
	cur     int64 // the limit in effect (base scaled)
	perDay  bool
	tb      *tokenBucket // continuous refill (OpenAI, Anthropic)
	fw      *fixedWindow // Azure: enforced window
	display *fixedWindow // Azure RPM: the calendar minute the headers show
	denied  int64
	counted int64
}

// scaled returns limit × f, floored, at least 1.
func scaled(limit int64, f float64) int64 {
	return max(1, int64(math.Floor(float64(limit)*f)))
}

func (m *meter) advance(now time.Time) {
	switch {
	case m.tb != nil:
		m.tb.advance(now)
	case m.fw != nil:
		m.fw.advance(now)
		if m.display != nil {
			m.display.advance(now)
		}
	}
}

// setFactor applies a scale factor. Call advance first.
func (m *meter) setFactor(f float64) {
	m.cur = scaled(m.base, f)
	switch {
	case m.tb != nil:
		m.tb.setRate(uint64(m.cur))
	case m.metric == MetricRequests: // Azure: per calendar second
		m.fw.setLimit((m.cur + 59) / 60)
		m.display.setLimit(m.cur)
	default:
		m.fw.setLimit(m.cur)
	}
}

// has reports whether n more units are admitted now (n ≤ 0 asks for a
// positive balance, the OTPM rule).
func (m *meter) has(n int64) bool {
	switch {
	case m.fw != nil:
		return m.fw.has(n)
	case n <= 0:
		return m.tb.positive()
	}
	return m.tb.has(n)
}

// take debits n (negative: a refund) and counts it.
func (m *meter) take(n int64) {
	if m.fw != nil {
		m.fw.count += n
		if m.display != nil {
			m.display.count += n
		}
		// A refund of a charge made in an earlier window gives back
		// nothing: that window's count is gone.
		m.fw.count = max(m.fw.count, 0)
		if m.display != nil {
			m.display.count = max(m.display.count, 0)
		}
	} else {
		m.tb.take(n)
	}
	m.counted += n
}

// takeFailed counts a request the vendor rejected but still counts: one
// unit, never below zero (never above the window's limit).
func (m *meter) takeFailed() {
	if m.fw != nil {
		if m.fw.has(1) {
			m.fw.count++
			m.counted++
		}
		if m.display != nil && m.display.has(1) {
			m.display.count++
		}
		return
	}
	m.counted += m.tb.takeFloor(1)
}

// waitFor returns how long until has(n) holds.
func (m *meter) waitFor(now time.Time, n int64) time.Duration {
	switch {
	case m.fw != nil:
		if m.fw.has(n) {
			return 0
		}
		return m.fw.untilReset(now)
	case n <= 0:
		return m.tb.waitFor(amount{frac: 1})
	}
	return m.tb.waitFor(amount{whole: n})
}

// view is a meter as the headers show it.
type view struct {
	metric    Metric
	limit     int64
	remaining int64
	reset     time.Duration // until the limit is back to its initial state
}

// view returns the header values: the limit in effect, what remains of it
// (the limit less what the bucket lacks to be full) and the time to full.
func (m *meter) view(now time.Time) view {
	v := view{metric: m.metric, limit: m.cur}
	switch {
	case m.tb != nil:
		cap, bal := m.tb.cap, m.tb.bal
		r := m.cur - (cap.whole - bal.whole)
		if bal.frac < cap.frac {
			r--
		}
		v.remaining = min(max(r, 0), m.cur)
		v.reset = m.tb.untilFull()
	default:
		w := m.fw
		if m.display != nil {
			w = m.display
		}
		v.remaining = max(w.limit-w.count, 0)
		v.reset = 0
		if w.count > 0 {
			v.reset = w.untilReset(now)
		}
	}
	return v
}

// scaleWindow is one period of scaled limits.
type scaleWindow struct {
	from, until time.Time
	factor      float64
}

// limiter holds a Sim's meters and applies its scale schedule. It is not
// safe for concurrent use: the Sim locks around it.
type limiter struct {
	vendor  Vendor
	meters  []*meter // in the order they are checked
	byName  map[Metric]*meter
	scales  []scaleWindow
	changes []time.Time // pending instants at which the factor changes, sorted
	factor  float64
	now     time.Time // the latest instant applied
	adjust  bool      // TPM and TPD are settled to the usage (Config.Reading)
}

func newLimiter(v Vendor, l Limits, now time.Time) *limiter {
	lm := &limiter{vendor: v, byName: map[Metric]*meter{}, factor: 1, now: now}
	const minute, day = time.Minute, 24 * time.Hour
	addBucket := func(m Metric, limit int64, period, burst time.Duration) {
		if limit == 0 {
			return
		}
		mt := &meter{metric: m, base: limit, cur: limit, perDay: period == day,
			tb: newTokenBucket(uint64(limit), period, burst, now)}
		lm.meters = append(lm.meters, mt)
		lm.byName[m] = mt
	}
	switch v {
	case OpenAI:
		addBucket(MetricRequests, l.RPM, minute, time.Second)
		addBucket(MetricTokens, l.TPM, minute, minute)
		addBucket(MetricRequestsPerDay, l.RPD, day, day)
		addBucket(MetricTokensPerDay, l.TPD, day, day)
	case Anthropic:
		addBucket(MetricRequests, l.RPM, minute, time.Second)
		addBucket(MetricInputTokens, l.ITPM, minute, minute)
		addBucket(MetricOutputTokens, l.OTPM, minute, minute)
	case Azure:
		rpm := l.RPM
		if rpm == 0 && l.TPM > 0 {
			rpm = max(1, l.TPM*6/1000)
		}
		if rpm > 0 {
			mt := &meter{metric: MetricRequests, base: rpm, cur: rpm,
				fw:      &fixedWindow{size: time.Second, limit: (rpm + 59) / 60},
				display: &fixedWindow{size: minute, limit: rpm}}
			lm.meters = append(lm.meters, mt)
			lm.byName[MetricRequests] = mt
		}
		if l.TPM > 0 {
			mt := &meter{metric: MetricTokens, base: l.TPM, cur: l.TPM,
				fw: &fixedWindow{size: minute, limit: l.TPM}}
			lm.meters = append(lm.meters, mt)
			lm.byName[MetricTokens] = mt
		}
	}
	for _, m := range lm.meters {
		m.advance(now)
	}
	return lm
}

// scale adds a period of scaled limits.
func (l *limiter) scale(from, until time.Time, f float64) {
	l.scales = append(l.scales, scaleWindow{from, until, f})
	l.changes = append(l.changes, from, until)
	slices.SortFunc(l.changes, func(a, b time.Time) int { return a.Compare(b) })
}

// factorAt returns the factor in effect at t: the lowest of the periods
// covering it, 1 if none.
func (l *limiter) factorAt(t time.Time) float64 {
	f, any := 0.0, false
	for _, s := range l.scales {
		if !t.Before(s.from) && t.Before(s.until) {
			if !any || s.factor < f {
				f, any = s.factor, true
			}
		}
	}
	if !any {
		return 1
	}
	return f
}

// advance brings every meter to now, applying the factor changes due on
// the way at their own instants.
func (l *limiter) advance(now time.Time) {
	if now.Before(l.now) {
		now = l.now // the clock went back: decide at the latest instant seen
	}
	for len(l.changes) > 0 && !l.changes[0].After(now) {
		t := l.changes[0]
		l.changes = l.changes[1:]
		if t.Before(l.now) {
			t = l.now
		}
		for _, m := range l.meters {
			m.advance(t)
		}
		if f := l.factorAt(t); f != l.factor {
			l.factor = f
			for _, m := range l.meters {
				m.setFactor(f)
			}
		}
		l.now = t
	}
	l.scales = slices.DeleteFunc(l.scales, func(s scaleWindow) bool { return !s.until.After(now) })
	for _, m := range l.meters {
		m.advance(now)
	}
	l.now = now
}
