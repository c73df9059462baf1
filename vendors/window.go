package vendors

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ontopix/sluice/bucket"
)

// A vendor may count a per-minute limit per calendar minute rather than
// in a bucket that refills continuously: it publishes the limit, not how
// it counts. Under a calendar count what is spent stays spent until the
// minute ends, while a Sluice bucket earns its refill all along; a bucket
// that starts full, or filled up while the load paused, can then grant its
// burst and its refill within one minute, which holds one limit.
//
// The vendor's headers tell the two apart. A bucket is full again when
// what it lacks has refilled: its reset is (limit − remaining) × window /
// limit from now. A calendar count is full again at the minute's end,
// whatever remains. When a response's reset is further from the bucket's
// than the headers' precision allows, and sooner than a whole window
// (a count that has just begun, and a sliding window, whose reset is a
// window after its last admission, look like a bucket there), the
// Reactor holds the dimension so that it earns no more than the vendor
// reports remaining by the reset: a cooldown until reset − remaining ÷
// the bucket's refill rate, from which the bucket refills to at most the
// remaining at the reset. A hold never ends later than the reset, so it
// lasts less than the window; it is applied only with headers believed
// (a limit reported above the published one, a flapping or implausible
// one, are not).

// calendarBound returns what d may still grant, in tokens, before the
// reset s reports for its metric, when s shows a calendar count for it:
// the remaining rem less what d's bucket refills until the reset. It is
// negative when the refill alone is more than remains. false when s does
// not show a calendar count.
func (r *Reactor) calendarBound(d Dimension, s Signals, rem int64, now time.Time) (int64, bool) {
	if d.Config.Type == bucket.Concurrent || d.Window <= 0 || d.Limit <= 0 || d.Config.RefillAmount <= 0 || d.Config.RefillPeriod <= 0 {
		return 0, false
	}
	m := s.Metric(d.Metric)
	if !m.Reset.Known || !m.Limit.Known || m.Limit.Value <= 0 || m.Limit.Value > d.Limit {
		return 0, false // a limit above the published one disagrees with it: not believed
	}
	limit := m.Limit.Value
	if m.Granularity > limit/50 {
		return 0, false // a remaining value too coarse to tell the readings apart
	}
	rem = min(rem, limit)
	reset := m.Reset.At.Sub(now)
	w := float64(d.Window)
	// The headers' precision: a reset in whole seconds, a remaining value
	// rounded to its granularity, and a fiftieth of the window for the
	// time between the vendor's count and the response's arrival.
	tol := time.Second + d.Window/50 + time.Duration(w*float64(m.Granularity)/float64(limit))
	if reset <= 0 || reset >= d.Window-tol || 4*tol > d.Window {
		return 0, false
	}
	asBucket := time.Duration(w * float64(limit-rem) / float64(limit))
	if diff := reset - asBucket; diff <= tol && diff >= -tol {
		return 0, false // a bucket's reset
	}
	if !r.countShown(d, m.Reset.At, tol, now) {
		return 0, false
	}
	refill := math.Ceil(float64(reset) * float64(d.Config.RefillAmount) / float64(d.Config.RefillPeriod))
	return rem - int64(min(refill, float64(bucket.MaxCapacity))), true
}

// countSeen is what a dimension's resets showed of a calendar count.
type countSeen struct {
	at    time.Time // when a reset unlike a bucket's was first reported
	reset time.Time // the reset then reported
	until time.Time // until when the dimension is known to be counted per calendar window
}

// countShown reports whether d's resets show a calendar count, given a
// reset at reset unlike a bucket's, reported at now: two such reports at
// least tol apart that name the same end of window, give or take tol,
// show it, and it is then believed for two windows past that end. One
// report does not: a rounded remaining value, a late response, can make
// a bucket's reset look unlike one once, but not twice on the same
// instant.
func (r *Reactor) countShown(d Dimension, reset time.Time, tol time.Duration, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.counts[d.Name]
	if c == nil {
		c = &countSeen{}
		r.counts[d.Name] = c
	}
	if now.Before(c.until) {
		return true
	}
	same := !c.at.IsZero() && now.Before(c.reset) && c.reset.Sub(reset).Abs() <= tol
	if same && now.Sub(c.at) >= tol {
		c.until = reset.Add(2 * d.Window)
		return true
	}
	if !same {
		c.at, c.reset = now, reset
	}
	return false
}

// holdFor cools d down for as long as its bucket takes to refill -bound
// tokens (bound < 0, from calendarBound), so that it earns nothing it
// would grant before the vendor's reset. It reports whether it applied a
// cooldown: one no later than this Reactor's last hold of d is not applied
// again.
func (r *Reactor) holdFor(ctx context.Context, d Dimension, bound int64, now time.Time) (bool, error) {
	hold := time.Duration(math.Ceil(float64(-bound) * float64(d.Config.RefillPeriod) / float64(d.Config.RefillAmount)))
	if hold < time.Millisecond || !r.newHold(d.Name, now.Add(hold)) {
		return false, nil
	}
	if _, err := r.client.CooldownFor(ctx, d.Name, hold); err != nil {
		return false, fmt.Errorf("vendors: holding %s until its calendar window ends: %w", d.Name, err)
	}
	return true, nil
}

// newHold records a hold of dim until until, and reports whether it ends
// later than the one recorded: a cooldown never shortens, so an earlier or
// equal end changes nothing and is not applied again.
func (r *Reactor) newHold(dim string, until time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !until.After(r.held[dim].Add(holdSlack)) {
		return false
	}
	r.held[dim] = until
	return true
}

// holdSlack is how much later than the recorded hold a new one must end
// to be applied: responses within the same window report the same reset,
// give or take the precision of the headers.
const holdSlack = 100 * time.Millisecond
