package bucket

// Refunds and the capacity.
//
// A call charged at an estimate E and settled later at its usage A < E
// gives back R = E − A. Had the bucket been charged A at the grant, it
// would have held R more from the grant on, and its refill would have
// been capped at the capacity as soon as that larger balance reached it:
// the refill lost to the cap is gone for good. A refund of the whole R,
// made late, hands that lost refill out again, and a window can then see
// more than capacity + rate × window (a vendor counting usage as it
// happens would answer with 429s).
//
// The exact refund is what the bucket would hold now had the call been
// charged A from its grant, less what it holds: with M the highest
// balance since the grant, in the bucket's history as corrected by every
// refund made since (a refund raises the balance, in that history, from
// its own grant on), the refund is min(R, capacity − M), and never below
// zero. The type peaks keeps, for every instant a pending call may have been
// granted at, an upper bound of that M: a short list of (instant, level)
// entries, oldest first, levels falling. A call granted at g reads the
// last entry at or before g. Each write of the bucket notes its balance
// (notePeak), each grant adds an entry (grantPeak), and each refund
// updates the entries as the corrected history requires (refundPeak):
// entries from the refunded call's on rise by the refund, older ones to
// at least the refunded entry's new level.
//
// With no bound on the number of entries the bound is exact: the balance
// is then always what the bucket would hold had every settled call been
// charged its usage at its grant and every pending one its estimate, so
// no window admits more than capacity + rate × window of usage, and no
// refund is cut that the cap did not take. Bounding the list merges
// neighbouring entries (the older instant, the higher level), which only
// raises a bound: refunds come out smaller, never larger.

// peak is one entry of peaks.
type peak struct {
	// At is an instant in Unix milliseconds, on the bucket's clock.
	At int64
	// Level bounds, in millitokens, the bucket's corrected balance at
	// every instant from At to now (see peaks).
	Level int64
}

// peaks bounds the refunds a bucket may give back (see refundPeak). It is
// ordered by At, rising, with Level falling. The zero value (empty) knows
// nothing: a refund of a call granted before its first entry gives
// nothing back. It is a value: the functions below return a new slice
// and never modify the one they are given.
type peaks []peak

// maxPeaks is the number of entries a store keeps per bucket.
const maxPeaks = 8

// notePeak returns p with level, the bucket's balance in millitokens at
// the current instant, taken into account: every entry's Level becomes at
// least level. A store calls it on every write of the bucket, after
// refilling it to the write's instant and before the write's own change:
// between two writes the balance only rises, so the balance at each write
// bounds it over the interval before.
func notePeak(p peaks, level int64) peaks {
	i := len(p)
	for i > 0 && p[i-1].Level <= level {
		i--
	}
	if i == len(p) {
		return p
	}
	out := make(peaks, i+1, max(i+1, len(p)))
	copy(out, p[:i])
	out[i] = peak{At: p[i].At, Level: level}
	return out
}

// grantPeak returns p with an entry for a grant made at the instant at
// (Unix milliseconds on the bucket's clock) that left the balance at level
// millitokens, merging entries so that at most n remain (n of 1 or
// more). The balance before the grant's charge must have been noted (notePeak).
// A grant at or before the last entry's instant, or that left the balance
// at or above its level, adds nothing: the last entry already bounds it.
func grantPeak(p peaks, at, level int64, n int) peaks {
	if k := len(p); k > 0 && (p[k-1].At >= at || p[k-1].Level <= level) {
		return p
	}
	out := make(peaks, len(p), len(p)+1)
	copy(out, p)
	out = append(out, peak{At: at, Level: level})
	for len(out) > max(n, 1) {
		out = mergeClosest(out)
	}
	return out
}

// mergeClosest removes the entry whose level is closest to the one before
// it: the older entry, whose level is higher, then bounds its interval too.
func mergeClosest(p peaks) peaks {
	best := 1
	for i := 2; i < len(p); i++ {
		if p[i-1].Level-p[i].Level < p[best-1].Level-p[best].Level {
			best = i
		}
	}
	return append(p[:best:best], p[best+1:]...)
}

// refundPeak returns how many of amount millitokens a call granted at
// grantedAt (Unix milliseconds on the bucket's clock) may give back to a
// bucket of the given capacity, and p updated for that refund. The refund
// is min(amount, capacity − M), never below zero, where M is the level of
// the last entry at or before grantedAt; with no such entry it is zero.
// The bucket's balance must be at most every entry's level (notePeak at
// the refund's instant), so that balance + refund never exceeds the
// capacity. A store that then gives back less than the bound (a floor or
// a cooldown's ceiling) may keep the returned peaks: a higher bound only
// makes later refunds smaller.
func refundPeak(p peaks, grantedAt, amount, capacity int64) (peaks, int64) {
	e := -1
	for i := len(p) - 1; i >= 0; i-- {
		if p[i].At <= grantedAt {
			e = i
			break
		}
	}
	if e < 0 || amount <= 0 {
		return p, 0
	}
	m := p[e].Level
	refund := min(amount, max(capacity-m, 0))
	if refund == 0 {
		return p, 0
	}
	raised := m + refund
	out := make(peaks, 0, len(p))
	for i, pk := range p {
		if i >= e {
			pk.Level += refund
		} else {
			pk.Level = max(pk.Level, raised)
		}
		// Levels must fall strictly: an entry no lower than the one
		// before it is bounded by that one and goes.
		if k := len(out); k > 0 && out[k-1].Level <= pk.Level {
			out[k-1].Level = pk.Level
			continue
		}
		out = append(out, pk)
	}
	return out, refund
}
