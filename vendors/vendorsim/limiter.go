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

// meter is one enforced limit: a token bucket, a fixed window or a
// sliding window (see Window).
type meter struct {
	metric  Metric
	base    int64 // the configured limit, per minute or per day
	cur     int64 // the limit in effect (base scaled)
	perDay  bool
	period  time.Duration  // the limit's: a minute or a day
	tb      *tokenBucket   // continuous refill
	fw      *fixedWindow   // calendar windows
	sw      *slidingWindow // the last window's units
	display *fixedWindow   // Azure RPM: the calendar minute the headers show
	denied  int64
	counted int64
}

// scaled returns limit × f, floored, at least 1.
func scaled(limit int64, f float64) int64 {
	return max(1, int64(math.Floor(float64(limit)*f)))
}

// scaleTo returns limit per period as a limit per interval, rounded up,
// at least 1.
func scaleTo(limit int64, interval, period time.Duration) int64 {
	if interval >= period {
		return limit
	}
	n := (uint64(limit)*uint64(interval) + uint64(period) - 1) / uint64(period)
	return max(1, int64(n))
}

func (m *meter) advance(now time.Time) {
	switch {
	case m.tb != nil:
		m.tb.advance(now)
	case m.fw != nil:
		m.fw.advance(now)
	case m.sw != nil:
		m.sw.advance(now)
	}
	if m.display != nil {
		m.display.advance(now)
	}
}

// setFactor applies a scale factor. Call advance first.
func (m *meter) setFactor(f float64) {
	m.cur = scaled(m.base, f)
	switch {
	case m.tb != nil:
		m.tb.setRate(uint64(m.cur))
	case m.fw != nil:
		m.fw.setLimit(scaleTo(m.cur, m.fw.size, m.period))
	case m.sw != nil:
		m.sw.setLimit(scaleTo(m.cur, m.sw.size, m.period))
	}
	if m.display != nil {
		m.display.setLimit(m.cur)
	}
}

// has reports whether n more units are admitted now (n ≤ 0 asks for a
// positive balance, the OTPM rule).
func (m *meter) has(n int64) bool {
	switch {
	case m.fw != nil:
		return m.fw.has(n)
	case m.sw != nil:
		return m.sw.has(n)
	case n <= 0:
		return m.tb.positive()
	}
	return m.tb.has(n)
}

// take debits n (negative: a refund) and counts it.
func (m *meter) take(n int64) {
	switch {
	case m.fw != nil:
		m.fw.count += n
		// A refund of a charge made in an earlier window gives back
		// nothing: that window's count is gone.
		m.fw.count = max(m.fw.count, 0)
	case m.sw != nil:
		m.sw.take(n)
	default:
		m.tb.take(n)
	}
	if m.display != nil {
		m.display.count = max(m.display.count+n, 0)
	}
	m.counted += n
}

// takeFailed counts a request the vendor rejected but still counts: one
// unit, never below zero (never above the window's limit).
func (m *meter) takeFailed() {
	if m.display != nil && m.display.has(1) {
		m.display.count++
	}
	switch {
	case m.fw != nil:
		if m.fw.has(1) {
			m.fw.count++
			m.counted++
		}
	case m.sw != nil:
		if m.sw.has(1) {
			m.sw.take(1)
			m.counted++
		}
	default:
		m.counted += m.tb.takeFloor(1)
	}
}

// waitFor returns how long until has(n) holds.
func (m *meter) waitFor(now time.Time, n int64) time.Duration {
	switch {
	case m.fw != nil:
		if m.fw.has(n) {
			return 0
		}
		return m.fw.untilReset(now)
	case m.sw != nil:
		return m.sw.waitFor(n)
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
	case m.sw != nil:
		v.remaining = max(m.sw.limit-m.sw.sum, 0)
		v.reset = m.sw.untilEmpty()
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
	adjust  bool      // TPM and TPD are settled to the usage (Rules.Reading)
}

func newLimiter(v Vendor, l Limits, r Rules, now time.Time) *limiter {
	lm := &limiter{vendor: v, byName: map[Metric]*meter{}, factor: 1, now: now}
	const minute, day = time.Minute, 24 * time.Hour
	reqInterval := r.RequestInterval
	if reqInterval == 0 {
		reqInterval = time.Second
	}
	add := func(m Metric, limit int64, period time.Duration) {
		if limit == 0 {
			return
		}
		mt := &meter{metric: m, base: limit, cur: limit, perDay: period == day, period: period}
		interval := period
		if m == MetricRequests {
			interval = reqInterval
		}
		w := r.Window
		if w == WindowVendor || period == day {
			w = WindowTokenBucket
			if v == Azure {
				w = WindowFixed
			}
		}
		switch w {
		case WindowFixed:
			mt.fw = &fixedWindow{size: interval, limit: scaleTo(limit, interval, period)}
		case WindowSliding:
			mt.sw = newSlidingWindow(interval, scaleTo(limit, interval, period), now)
		default:
			mt.tb = newTokenBucket(uint64(limit), period, interval, now)
		}
		if v == Azure && m == MetricRequests {
			mt.display = &fixedWindow{size: minute, limit: limit}
		}
		lm.meters = append(lm.meters, mt)
		lm.byName[m] = mt
	}
	switch v {
	case OpenAI:
		add(MetricRequests, l.RPM, minute)
		add(MetricTokens, l.TPM, minute)
		add(MetricRequestsPerDay, l.RPD, day)
		add(MetricTokensPerDay, l.TPD, day)
	case Anthropic:
		add(MetricRequests, l.RPM, minute)
		add(MetricInputTokens, l.ITPM, minute)
		add(MetricOutputTokens, l.OTPM, minute)
	case Azure:
		rpm := l.RPM
		if rpm == 0 && l.TPM > 0 {
			rpm = max(1, l.TPM*6/1000)
		}
		add(MetricRequests, rpm, minute)
		add(MetricTokens, l.TPM, minute)
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
