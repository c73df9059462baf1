package fleetcheck

import "sort"

// Span is a reference-time interval [From, To) in milliseconds.
type Span struct{ From, To int64 }

// TimeUse is what a time-based dimension admitted over [from, to] divided
// by what its limit allowed there: capacity + rate × (to − from).
func TimeUse(d Dimension, from, to int64) float64 {
	var admitted int64
	for _, e := range d.Events {
		if (e.Kind == Grant || e.Kind == Charge) && e.Hi >= from && e.Hi <= to {
			admitted += e.Cost
		}
	}
	l := d.Limit
	allowed := float64(l.Capacity) + float64(l.Amount)*float64(to-from)/float64(l.PeriodMs)
	return float64(admitted) / allowed
}

// SlotUse is, for a concurrent dimension, the slot-milliseconds held while
// callers waited (each instant counting at most the capacity) divided by
// the slot-milliseconds available then (capacity × time some caller
// waited). waits are the callers' waiting spans. It returns 1 when nobody
// waited.
func SlotUse(d Dimension, waits []Span) float64 {
	type edge struct{ at, held, waiting int64 }
	var edges []edge
	start := map[string]Event{}
	var end int64
	for _, e := range d.Events {
		end = max(end, e.Hi)
		switch e.Kind {
		case Grant:
			start[e.Lease] = e
		case Release:
			if g, ok := start[e.Lease]; ok && g.Hi < e.Lo {
				edges = append(edges, edge{g.Hi, g.Cost, 0}, edge{e.Lo, -g.Cost, 0})
			}
			delete(start, e.Lease)
		}
	}
	for _, g := range start {
		edges = append(edges, edge{g.Hi, g.Cost, 0}, edge{end + 1, -g.Cost, 0})
	}
	for _, w := range waits {
		if w.From < w.To {
			edges = append(edges, edge{w.From, 0, 1}, edge{w.To, 0, -1})
		}
	}
	sort.Slice(edges, func(i, j int) bool { return edges[i].at < edges[j].at })
	c := d.Limit.Capacity
	var held, waiting, used, avail, last int64
	for _, e := range edges {
		if waiting > 0 {
			used += min(held, c) * (e.at - last)
			avail += c * (e.at - last)
		}
		held, waiting, last = held+e.held, waiting+e.waiting, e.at
	}
	if avail == 0 {
		return 1
	}
	return float64(used) / float64(avail)
}
