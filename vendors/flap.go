package vendors

import "time"

// A lower limit is believed once it has been reported for a tenth of the
// dimension's window, or once a rate-limit 429 on the dimension's metric
// came while it was reported: a vendor whose pool really shrank keeps
// reporting it, and its 429s say so at once, while a report that flips
// back sooner is a flap. Until then it is neither followed nor synced to
// (Reaction.Unconfirmed): following it at once would clamp the balance
// to the lower capacity, and syncing to the remaining beside it would
// take as much, for a report that may flip back within the second.

// settleFraction is the part of a dimension's window for which a lower
// limit must be reported before it is believed, without a 429.
const settleFraction = 10

// A limit header that flaps — reports a lower limit, then the published
// one again within the dimension's window, again and again — does not
// describe a limit the vendor enforces: a vendor whose pool really shrank
// keeps reporting it, and its 429s say so. Following every flap costs the
// fleet the difference (each lowering clamps the balance, each sync to the
// lower remaining takes more), so after flapsToDistrust flaps within two
// windows the Reactor stops following the dimension's lower reports, and
// syncing to the remaining values reported beside them, for two windows
// from the last flap (Reaction.Unstable). A rate-limit 429 on the
// dimension's metric ends that at once: the vendor enforces something,
// and its headers are heard again.

// flapsToDistrust is how many flaps within two windows make a dimension's
// limit reports unstable.
const flapsToDistrust = 2

// flapState is a dimension's recent flaps.
type flapState struct {
	lowAt    time.Time   // when the current lower report began; zero when none
	hit      time.Time   // when a rate-limit 429 on the metric last came
	flaps    []time.Time // when recent flaps ended, within two windows
	unstable time.Time   // until when lower reports are ignored
}

// noteReport records what a response reported of d's limit (known and
// below published: low) at now. Call with r.mu held.
func (r *Reactor) noteReport(d Dimension, low bool, now time.Time) {
	f := r.flaps[d.Name]
	if f == nil {
		if !low {
			return
		}
		f = &flapState{}
		r.flaps[d.Name] = f
	}
	switch {
	case low && f.lowAt.IsZero():
		f.lowAt = now
	case !low && !f.lowAt.IsZero():
		if now.Sub(f.lowAt) < d.Window {
			f.flaps = append(f.flaps, now)
		}
		f.lowAt = time.Time{}
	}
	kept := f.flaps[:0]
	for _, t := range f.flaps {
		if now.Sub(t) < 2*d.Window {
			kept = append(kept, t)
		}
	}
	f.flaps = kept
	if len(f.flaps) >= flapsToDistrust {
		f.unstable = now.Add(2 * d.Window)
	}
}

// unstable reports that d's lower limit reports are being ignored. Call
// with r.mu held.
func (r *Reactor) unstable(d string, now time.Time) bool {
	f := r.flaps[d]
	return f != nil && now.Before(f.unstable)
}

// confirmed ends the instability of the dimensions a rate-limit 429 on
// metric m concerns, at now: the vendor enforces a limit there, and a
// lower limit reported beside it is believed at once.
func (r *Reactor) confirmed(m Metric, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.profile.Dimensions {
		if m != "" && d.Metric != m {
			continue
		}
		f := r.flaps[d.Name]
		if f == nil {
			f = &flapState{}
			r.flaps[d.Name] = f
		}
		f.unstable, f.flaps, f.hit = time.Time{}, f.flaps[:0], now
	}
}

// unsettled reports that d's current lower limit report is not believed
// yet: reported for less than a tenth of d's window, with no rate-limit
// 429 on its metric since it began. Call with r.mu held.
func (r *Reactor) unsettled(d Dimension, now time.Time) bool {
	f := r.flaps[d.Name]
	if f == nil || f.lowAt.IsZero() || !f.hit.Before(f.lowAt) {
		return false
	}
	return now.Sub(f.lowAt) < d.Window/settleFraction
}

// noteReports records each dimension's reported limit in s, and returns
// the dimensions whose lower reports are being ignored as unstable, and
// those whose lower report is not believed yet.
func (r *Reactor) noteReports(s Signals, now time.Time) (out, unconfirmed []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.profile.Dimensions {
		lim := s.Metric(d.Metric).Limit
		if !lim.Known || lim.Value <= 0 || d.Limit <= 0 || d.Window <= 0 {
			continue
		}
		low := lim.Value < d.Limit
		r.noteReport(d, low, now)
		switch {
		case low && r.unstable(d.Name, now):
			out = append(out, d.Name)
		case low && r.unsettled(d, now):
			unconfirmed = append(unconfirmed, d.Name)
		}
	}
	return out, unconfirmed
}

// distrusted reports that s gives d a lower limit that is not to be
// believed: d's reports are unstable, or this one is not believed yet
// (see unsettled).
func (r *Reactor) distrusted(d Dimension, s Signals) bool {
	lim := s.Metric(d.Metric).Limit
	if !lim.Known || lim.Value <= 0 || lim.Value >= d.Limit {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	return r.unstable(d.Name, now) || r.unsettled(d, now)
}
