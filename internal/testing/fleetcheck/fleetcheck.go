// Package fleetcheck checks a recorded history of a fleet's use of a shared
// limit against the guarantee, not against the code that produced it.
//
// A history gives, per dimension, its limit and what was admitted, in
// milliseconds of one reference clock (the harness's true time, never a
// client's skewed clock). Each event carries an interval [Lo, Hi]: the
// earliest and latest reference instants at which it can have taken
// effect. For a grant, Hi is the instant the caller proceeds (Acquire or
// Wait returned) and Lo the instant the client's own clock read the
// lease's valid instant, clamped to the call; for a settlement charge, the
// Adjust call's start and end. The checker counts an event in a window
// only when its whole interval lies inside the window, so what it reports
// is an excess that no placement of the events inside their intervals can
// explain away: it never blames the harness's own latency on the code.
// With Lo == Hi it is the exact definition.
//
// Excess, for a time-based dimension, is the maximum over every window
// [s, e] ending at a grant of admitted(s, e) − (capacity + rate × (e − s)),
// where admitted counts the grants and the settlement charges inside the
// window; the target is 0. A window ending at a settlement is not judged:
// a settlement reports usage that already happened, which no admission
// can take back, and it counts against every grant after it. For a concurrent dimension it is the most slots held at one instant
// less the capacity, a hold counting from its grant's Hi to its end's Lo.
package fleetcheck

import (
	"fmt"
	"sort"
)

// Limit is a dimension's limit. Amount tokens refill every PeriodMs; a
// concurrent dimension has Concurrent set and Capacity slots.
type Limit struct {
	Capacity   int64
	Amount     int64
	PeriodMs   int64
	Concurrent bool
}

// Validate reports a limit the checker cannot use.
func (l Limit) Validate() error {
	switch {
	case l.Capacity < 1:
		return fmt.Errorf("fleetcheck: capacity %d: must be at least 1", l.Capacity)
	case l.Concurrent:
		return nil
	case l.Amount < 1:
		return fmt.Errorf("fleetcheck: amount %d: must be at least 1", l.Amount)
	case l.PeriodMs < 1:
		return fmt.Errorf("fleetcheck: period %d ms: must be at least 1", l.PeriodMs)
	}
	return nil
}

// Kind is what an event records.
type Kind uint8

// The event kinds.
const (
	// Grant is an admission of Cost tokens (or Cost slots, held until the
	// matching Release).
	Grant Kind = iota + 1
	// Charge is a settlement above the estimate: Cost more tokens spent.
	Charge
	// Release ends the hold of the Grant with the same Lease on a
	// concurrent dimension; a holder that died releases at its death.
	Release
	// Restart marks the store restarting empty; it is listed, not excused.
	Restart
)

// String names k in lower case ("grant", "charge", "release", "restart"),
// or "kind(N)" for a value outside the constants.
func (k Kind) String() string {
	switch k {
	case Grant:
		return "grant"
	case Charge:
		return "charge"
	case Release:
		return "release"
	case Restart:
		return "restart"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is one recorded event. Lo <= Hi, in reference milliseconds.
type Event struct {
	Kind   Kind
	Lo, Hi int64
	Cost   int64
	// Lease pairs a concurrent Grant with its Release.
	Lease string
}

// Dimension is one dimension's limit and events.
type Dimension struct {
	Name   string
	Limit  Limit
	Events []Event
}

// Report is the checker's verdict on one dimension.
type Report struct {
	Name string
	// Excess is the largest excess in tokens (slots for a concurrent
	// dimension); 0 or below meets the guarantee.
	Excess float64
	// From and To bound the window where it occurred (reference ms); for a
	// concurrent dimension both are the instant of the peak.
	From, To int64
	// Admitted is what the window counted; Allowed what the limit allowed.
	Admitted int64
	Allowed  float64
	// Total is everything admitted over the history (grants plus charges).
	Total int64
	// Restarts lists the store's restarts.
	Restarts []int64
}

// String formats the report for a failure message.
func (r Report) String() string {
	s := fmt.Sprintf("%s: excess %+.1f (admitted %d, allowed %.1f in window [%d ms, %d ms], %d ms long; total admitted %d)",
		r.Name, r.Excess, r.Admitted, r.Allowed, r.From, r.To, r.To-r.From, r.Total)
	if len(r.Restarts) > 0 {
		s += fmt.Sprintf("; store restarted empty at %v ms", r.Restarts)
	}
	return s
}

// Check returns d's report, or an error for a malformed history.
func Check(d Dimension) (Report, error) {
	if err := d.Limit.Validate(); err != nil {
		return Report{}, fmt.Errorf("%s: %w", d.Name, err)
	}
	r := Report{Name: d.Name}
	for i, e := range d.Events {
		if e.Lo > e.Hi {
			return Report{}, fmt.Errorf("fleetcheck: %s: event %d: lo %d after hi %d", d.Name, i, e.Lo, e.Hi)
		}
		if e.Cost < 0 {
			return Report{}, fmt.Errorf("fleetcheck: %s: event %d: negative cost %d", d.Name, i, e.Cost)
		}
		switch e.Kind {
		case Grant, Charge:
			r.Total += e.Cost
		case Restart:
			r.Restarts = append(r.Restarts, e.Hi)
		}
	}
	if d.Limit.Concurrent {
		return held(d, r)
	}
	return windows(d, r), nil
}

// windows computes the time-based excess. Each grant G ends the windows it
// is judged in: a window [s, G.Hi] counts the grants inside it and the
// settlement charges that certainly happened before G became valid (their
// Hi at or before G.Lo) — the guarantee counts each grant at its valid
// instant plus every settlement charged before then; a charge whose call
// overlaps G's is not held against G. A window ending at a settlement is
// not judged: a settlement reports usage that already happened, which no
// admission can take back, and it counts against every grant after it.
// It takes O(n²) for n events, plenty for a harness's histories.
func windows(d Dimension, r Report) Report {
	var ev []Event
	for _, e := range d.Events {
		if (e.Kind == Grant || e.Kind == Charge) && e.Cost > 0 {
			ev = append(ev, e)
		}
	}
	// Latest start first, so that a sweep accumulates a window's tokens.
	sort.Slice(ev, func(i, j int) bool { return ev[i].Lo > ev[j].Lo })
	p, a, c := d.Limit.PeriodMs, d.Limit.Amount, d.Limit.Capacity
	best, bestSet := int64(0), false
	var bestEnd Event
	for _, g := range ev {
		if g.Kind != Grant {
			continue
		}
		var acc int64
		for i := 0; i < len(ev); {
			start := ev[i].Lo
			for ; i < len(ev) && ev[i].Lo == start; i++ {
				if counts(ev[i], g) {
					acc += ev[i].Cost
				}
			}
			if start > g.Hi || acc == 0 {
				continue
			}
			// p × (admitted − capacity − amount × (end − start) / p)
			if v := p*acc - c*p - a*(g.Hi-start); !bestSet || v > best {
				best, bestSet, bestEnd = v, true, g
				r.From, r.To = start, g.Hi
			}
		}
	}
	if !bestSet {
		// Nothing granted: no window is judged.
		r.Allowed = float64(c)
		r.Excess = -float64(c)
		return r
	}
	r.Excess = float64(best) / float64(p)
	r.Allowed = float64(c) + float64(a)*float64(r.To-r.From)/float64(p)
	for _, e := range ev {
		if e.Lo >= r.From && counts(e, bestEnd) {
			r.Admitted += e.Cost
		}
	}
	return r
}

// counts reports whether e counts in a window that grant g ends: a grant
// that ended by then, or a charge made before g became valid.
func counts(e, g Event) bool {
	if e.Kind == Charge {
		return e.Hi <= g.Lo
	}
	return e.Hi <= g.Hi
}

// held computes the most slots held at once over definite holds.
func held(d Dimension, r Report) (Report, error) {
	type edge struct {
		at    int64
		delta int64
	}
	start := map[string]Event{}
	var edges []edge
	var end int64
	for _, e := range d.Events {
		end = max(end, e.Hi)
		switch e.Kind {
		case Grant:
			start[e.Lease] = e
		case Release:
			g, ok := start[e.Lease]
			if !ok {
				return Report{}, fmt.Errorf("fleetcheck: %s: release of lease %q that was never granted", d.Name, e.Lease)
			}
			delete(start, e.Lease)
			if g.Hi < e.Lo {
				edges = append(edges, edge{g.Hi, g.Cost}, edge{e.Lo, -g.Cost})
			}
		}
	}
	for _, g := range start { // never released: held to the end
		edges = append(edges, edge{g.Hi, g.Cost}, edge{end + 1, -g.Cost})
	}
	// Ends sort before starts at the same instant: a hold is half-open.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta
	})
	var cur, peak int64
	for _, e := range edges {
		cur += e.delta
		if cur > peak {
			peak, r.From, r.To = cur, e.at, e.at
		}
	}
	r.Admitted, r.Allowed = peak, float64(d.Limit.Capacity)
	r.Excess = float64(peak - d.Limit.Capacity)
	return r, nil
}
