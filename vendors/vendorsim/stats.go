package vendorsim

import (
	"slices"
	"time"
)

// Stats is a Sim's ground-truth accounting since it started.
type Stats struct {
	Vendor  Vendor
	Start   time.Time     // when the Sim started (its Clock)
	Elapsed time.Duration // from Start to the Clock's now
	// Requests counts every request received that parsed; BadRequests
	// those that did not.
	Requests    int64
	BadRequests int64
	// Admitted counts the requests the limits admitted.
	Admitted int64
	// RateLimited counts 429s for a limit (with retry-after), TooLarge the
	// 429s for a request whose charge exceeds a limit outright (never
	// admitted), QuotaExceeded the quota-exhausted 429s, Overloaded the
	// injected 503/529s.
	RateLimited   int64
	TooLarge      int64
	QuotaExceeded int64
	Overloaded    int64
	// InFlight counts admitted requests not yet completed.
	InFlight int64
	// InputTokens and OutputTokens sum the usage reported by the completed
	// requests (input tokens include cached ones).
	InputTokens  int64
	OutputTokens int64
	// Metrics has one entry per enforced limit, in the order the Sim
	// checks them.
	Metrics []MetricStats
	// Series holds a point per SeriesInterval in which something happened
	// (Config.SeriesInterval; empty if 0).
	Series []Point
}

// MetricStats is the accounting of one limit.
type MetricStats struct {
	Metric Metric
	// Limit is the configured limit, per minute (per day for the daily
	// metrics); Current is the limit in effect now (scaled).
	Limit   int64
	Current int64
	// Denied counts the 429s this limit caused (a request can be denied by
	// several limits at once).
	Denied int64
	// Counted is what the limit counted: charges at admission adjusted by
	// settlement, plus what rejected requests were charged (OpenAI and
	// Azure RPM). For Anthropic output tokens, the output produced.
	Counted int64
	// Allowance is the most the rule could have admitted from Start to
	// now: the initial capacity plus the refill at the rate in effect at
	// each instant (a bucket), or the limit of every window (Azure's fixed
	// windows). Utilisation is Counted / Allowance. Counted exceeds it
	// only by the debt the rule allows (settlements and output past
	// admission), which is Debt.
	Allowance int64
	// Debt is how far below zero the bucket is now, rounded up (0 if it is
	// not).
	Debt int64
	// Remaining is what the headers would report as remaining now.
	Remaining int64
}

// Point is the cumulative accounting at one instant.
type Point struct {
	At          time.Duration // since Start
	Admitted    int64
	RateLimited int64
	Counted     []int64 // per metric, in the order of Stats.Metrics
}

// counters are the Sim's running totals, guarded by Sim.mu.
type counters struct {
	seq            uint64
	requests       int64
	badRequests    int64
	admitted       int64
	rateLimited    int64
	tooLarge       int64
	quota          int64
	overloaded     int64
	inFlight       int64
	inputTokens    int64
	outputTokens   int64
	series         []Point
	nextSampleAt   time.Duration
	metricsOrdered []*meter
}

func (c *counters) init(l *limiter) { c.metricsOrdered = l.meters }

// record notes an admission decision for the series.
func (c *counters) record(s *Sim, now time.Time, _ *denial) { c.sample(s, now) }

// sample appends a series point if an interval has passed.
func (c *counters) sample(s *Sim, now time.Time) {
	every := s.cfg.SeriesInterval
	if every <= 0 {
		return
	}
	at := now.Sub(s.start)
	if at < c.nextSampleAt {
		return
	}
	p := Point{At: at, Admitted: c.admitted, RateLimited: c.rateLimited, Counted: make([]int64, len(c.metricsOrdered))}
	for i, m := range c.metricsOrdered {
		p.Counted[i] = m.counted
	}
	c.series = append(c.series, p)
	c.nextSampleAt = (at/every + 1) * every
}

// Stats returns the accounting up to the Clock's now.
func (s *Sim) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.lim.advance(now)
	c := &s.st
	st := Stats{Vendor: s.cfg.Vendor, Start: s.start, Elapsed: now.Sub(s.start), Requests: c.requests,
		BadRequests: c.badRequests, Admitted: c.admitted, RateLimited: c.rateLimited, TooLarge: c.tooLarge,
		QuotaExceeded: c.quota, Overloaded: c.overloaded, InFlight: c.inFlight, InputTokens: c.inputTokens,
		OutputTokens: c.outputTokens, Series: slices.Clone(c.series)}
	for _, m := range s.lim.meters {
		v := m.view(now)
		ms := MetricStats{Metric: m.metric, Limit: m.base, Current: m.cur, Denied: m.denied, Counted: m.counted,
			Remaining: v.remaining}
		if m.tb != nil {
			ms.Allowance = m.tb.allowance().whole
			ms.Debt = max(-m.tb.bal.whole, 0)
		} else if m.sw != nil {
			ms.Allowance = m.sw.allowance()
		} else {
			ms.Allowance = m.fw.allowance()
		}
		st.Metrics = append(st.Metrics, ms)
	}
	return st
}

// Metric returns the accounting of metric m, and whether the Sim enforces
// it.
func (st Stats) Metric(m Metric) (MetricStats, bool) {
	for _, ms := range st.Metrics {
		if ms.Metric == m {
			return ms, true
		}
	}
	return MetricStats{}, false
}
