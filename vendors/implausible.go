package vendors

import "math"

// A reported limit below the follow floor is implausible: a vendor does
// not cut a published limit to a tenth and less (a header saying 10 tokens
// a minute is a bug or a lie), and following it, or syncing balances to
// the remaining values beside it, would all but freeze the fleet on the
// word of one header. Such a report is ignored — the dimension is neither
// resized nor synced from that response — and counted (Reaction.Ignored,
// Reactor.IgnoredLimits). If the vendor really enforces it, its 429s cool
// the dimension down as any rate limit does.

// implausibleLimit reports that s gives d a limit below the follow floor.
func (r *Reactor) implausibleLimit(d Dimension, s Signals) bool {
	lim := s.Metric(d.Metric).Limit
	return lim.Known && lim.Value > 0 && d.Limit > 0 && lim.Value < r.floorOf(d)
}

// floorOf returns the lowest limit following may set on d.
func (r *Reactor) floorOf(d Dimension) int64 {
	return max(1, int64(math.Ceil(float64(d.Limit)*r.floor)))
}

// ignoreImplausible returns the dimensions whose reported limit in s is
// implausible, and counts them.
func (r *Reactor) ignoreImplausible(s Signals) []string {
	var out []string
	for _, d := range r.profile.Dimensions {
		if r.implausibleLimit(d, s) {
			out = append(out, d.Name)
		}
	}
	r.ignored.Add(uint64(len(out)))
	return out
}

// IgnoredLimits returns how many reported limits the Reactor ignored as
// implausible (below the follow floor) since it was made.
func (r *Reactor) IgnoredLimits() uint64 { return r.ignored.Load() }
