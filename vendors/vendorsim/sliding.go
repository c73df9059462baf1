package vendorsim

import "time"

// slidingWindow admits up to limit units over any size-long stretch: a
// unit counted at t frees its share of the limit at t + size.
type slidingWindow struct {
	size    time.Duration
	limit   int64
	entries []slide // in time order, from head
	head    int
	sum     int64 // units in the window
	start   time.Time
	now     time.Time
	// maxLimit is the highest limit in effect since the start (for the
	// allowance).
	maxLimit int64
}

// slide is units counted at one instant.
type slide struct {
	at time.Time
	n  int64
}

func newSlidingWindow(size time.Duration, limit int64, now time.Time) *slidingWindow {
	return &slidingWindow{size: size, limit: limit, start: now, now: now, maxLimit: limit}
}

// advance drops the units counted size or more before now.
func (w *slidingWindow) advance(now time.Time) {
	if now.Before(w.now) {
		return
	}
	w.now = now
	for w.head < len(w.entries) && !w.entries[w.head].at.Add(w.size).After(now) {
		w.sum -= w.entries[w.head].n
		w.head++
	}
	if w.head > 1024 && w.head*2 > len(w.entries) {
		w.entries = append(w.entries[:0], w.entries[w.head:]...)
		w.head = 0
	}
}

// setLimit changes the limit from now on.
func (w *slidingWindow) setLimit(limit int64) {
	w.limit = limit
	w.maxLimit = max(w.maxLimit, limit)
}

// has reports whether n more units fit; n ≤ 0 asks for room for any.
func (w *slidingWindow) has(n int64) bool {
	if n <= 0 {
		return w.sum < w.limit
	}
	return w.sum+n <= w.limit
}

// take counts n units now. A refund (n < 0) takes back units counted
// most recently, never more than the window holds.
func (w *slidingWindow) take(n int64) {
	if n >= 0 {
		if n > 0 {
			w.entries = append(w.entries, slide{w.now, n})
			w.sum += n
		}
		return
	}
	for i := len(w.entries) - 1; i >= w.head && n < 0; i-- {
		d := min(w.entries[i].n, -n)
		w.entries[i].n -= d
		w.sum -= d
		n += d
	}
}

// waitFor returns how long from now until n more units fit (n ≤ 0: any).
func (w *slidingWindow) waitFor(n int64) time.Duration {
	if w.has(n) {
		return 0
	}
	need := w.sum + max(n, 1) - w.limit // units that must leave the window
	for _, e := range w.entries[w.head:] {
		need -= e.n
		if need <= 0 {
			return e.at.Add(w.size).Sub(w.now)
		}
	}
	return w.size // n exceeds the limit: never, but not before a window
}

// untilEmpty returns how long until every unit counted has left.
func (w *slidingWindow) untilEmpty() time.Duration {
	if w.sum <= 0 || w.head >= len(w.entries) {
		return 0
	}
	return w.entries[len(w.entries)-1].at.Add(w.size).Sub(w.now)
}

// allowance returns the most the rule could have admitted since the
// start: a full limit at the start and again every size.
func (w *slidingWindow) allowance() int64 {
	return w.maxLimit * (int64(w.now.Sub(w.start)/w.size) + 1)
}
