package vendorsim

import (
	"math"
	"math/bits"
	"time"
)

// amount is an exact non-integral quantity of units: whole + frac/period,
// with 0 ≤ frac < period. whole may be negative (debt).
type amount struct {
	whole int64
	frac  uint64
}

// less reports whether a < b.
func (a amount) less(b amount) bool {
	return a.whole < b.whole || (a.whole == b.whole && a.frac < b.frac)
}

// mulDiv returns a*b/c and (a*b)%c computed in 128 bits; ok is false when
// the quotient does not fit in 63 bits.
func mulDiv(a, b, c uint64) (q, r uint64, ok bool) {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return 0, 0, false
	}
	q, r = bits.Div64(hi, lo, c)
	return q, r, q <= math.MaxInt64
}

// tokenBucket is Bucket(C, R): capacity C (possibly fractional), refilled
// continuously at rate units per period, starting full. All arithmetic is
// exact: a balance is whole units plus a fraction in 1/period-nanosecond
// steps, so refilling for d nanoseconds adds exactly rate*d/period.
type tokenBucket struct {
	period uint64 // nanoseconds
	rate   uint64 // units per period
	burst  uint64 // nanoseconds of refill the capacity holds (period for TPM, 1 s for RPM)
	cap    amount
	bal    amount
	last   time.Time
	// potential is everything the refill offered since the start, whether
	// or not the bucket was full: the allowance is initial + potential.
	initial   amount
	potential amount
}

// newTokenBucket returns a full bucket refilling rate per period whose
// capacity is the refill of burst (at least one unit).
func newTokenBucket(rate uint64, period, burst time.Duration, now time.Time) *tokenBucket {
	b := &tokenBucket{period: uint64(period), burst: uint64(burst), last: now}
	b.setRate(rate)
	b.bal = b.cap
	b.initial = b.cap
	return b
}

// setRate changes the refill rate and the capacity that follows from it,
// clamping the balance to the new capacity. Call advance first.
func (b *tokenBucket) setRate(rate uint64) {
	b.rate = rate
	q, r, ok := mulDiv(rate, b.burst, b.period)
	if !ok {
		q, r = math.MaxInt64/2, 0
	}
	b.cap = amount{whole: int64(q), frac: r}
	if b.cap.less(amount{whole: 1}) {
		b.cap = amount{whole: 1}
	}
	if b.cap.less(b.bal) {
		b.bal = b.cap
	}
}

// add returns a + rate*d/period.
func (b *tokenBucket) add(a amount, d uint64) amount {
	hi, lo := bits.Mul64(b.rate, d)
	lo, carry := bits.Add64(lo, a.frac, 0)
	hi += carry
	if hi >= b.period {
		return amount{whole: math.MaxInt64 / 2}
	}
	q, r := bits.Div64(hi, lo, b.period)
	if q > math.MaxInt64/2 || a.whole > math.MaxInt64/2-int64(q) {
		return amount{whole: math.MaxInt64 / 2}
	}
	return amount{whole: a.whole + int64(q), frac: r}
}

// advance refills the bucket up to now. A clock going backwards refills
// nothing.
func (b *tokenBucket) advance(now time.Time) {
	if !now.After(b.last) {
		return
	}
	d := uint64(now.Sub(b.last))
	b.last = now
	b.potential = b.add(b.potential, d)
	if b.bal.less(b.cap) {
		b.bal = b.add(b.bal, d)
		if b.cap.less(b.bal) {
			b.bal = b.cap
		}
	}
}

// has reports whether the balance is at least n.
func (b *tokenBucket) has(n int64) bool { return !b.bal.less(amount{whole: n}) }

// positive reports whether the balance is above zero.
func (b *tokenBucket) positive() bool { return amount{}.less(b.bal) }

// take debits n (n may be negative: a refund, which never lifts the
// balance above the capacity). The balance may go into debt.
func (b *tokenBucket) take(n int64) {
	b.bal.whole -= n
	if b.cap.less(b.bal) {
		b.bal = b.cap
	}
}

// takeFloor debits up to n, never below zero, and returns the whole units
// it debited (a fraction below one unit is dropped, not counted).
func (b *tokenBucket) takeFloor(n int64) int64 {
	if b.has(n) {
		b.bal.whole -= n
		return n
	}
	took := max(b.bal.whole, 0)
	if b.bal.whole >= 0 {
		b.bal = amount{}
	}
	return took
}

// waitFor returns how long until the balance reaches target, rounded up to
// the nanosecond; 0 if it already has. A zero rate never refills.
func (b *tokenBucket) waitFor(target amount) time.Duration {
	if !b.bal.less(target) {
		return 0
	}
	if b.rate == 0 {
		return time.Duration(math.MaxInt64)
	}
	// need = (target - bal) in 1/period units, as a 128-bit value.
	dw := uint64(target.whole - b.bal.whole) // ≥ 0 since bal < target
	hi, lo := bits.Mul64(dw, b.period)
	var borrow uint64
	lo, borrow = bits.Sub64(lo, b.bal.frac, 0)
	hi -= borrow
	lo, carry := bits.Add64(lo, target.frac, 0)
	hi += carry
	// ceil(need / rate)
	lo, carry = bits.Add64(lo, b.rate-1, 0)
	hi += carry
	if hi >= b.rate {
		return time.Duration(math.MaxInt64)
	}
	q, _ := bits.Div64(hi, lo, b.rate)
	if q > math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(q)
}

// untilFull returns how long until the bucket is full again.
func (b *tokenBucket) untilFull() time.Duration { return b.waitFor(b.cap) }

// allowance returns the most the rule could have admitted since the
// start: the initial capacity plus every unit the refill offered.
func (b *tokenBucket) allowance() amount {
	w := b.initial.whole + b.potential.whole
	f := b.initial.frac + b.potential.frac
	if f >= b.period {
		w++
		f -= b.period
	}
	return amount{whole: w, frac: f}
}

// fixedWindow is a running count reset at every multiple of size since the
// Unix epoch (a calendar second or minute), admitting up to limit per
// window.
type fixedWindow struct {
	size  time.Duration
	limit int64
	index int64 // the window the count belongs to
	count int64
	// allowance sums, over the windows since the start, the highest limit
	// in effect during each one.
	allowed   int64
	windowMax int64
	started   bool
}

// windowIndex returns the window holding t.
func (w *fixedWindow) windowIndex(t time.Time) int64 {
	return t.UnixNano() / int64(w.size)
}

// advance moves to the window holding now, resetting the count if it is a
// new one.
func (w *fixedWindow) advance(now time.Time) {
	i := w.windowIndex(now)
	if !w.started {
		w.started, w.index, w.windowMax = true, i, w.limit
		return
	}
	if i <= w.index {
		return
	}
	// The windows between were empty: each could have admitted the limit.
	w.allowed += w.windowMax + (i-w.index-1)*w.limit
	w.index, w.count, w.windowMax = i, 0, w.limit
}

// setLimit changes the limit, from the current window on.
func (w *fixedWindow) setLimit(limit int64) {
	w.limit = limit
	w.windowMax = max(w.windowMax, limit)
}

// allowance returns the most the rule could have admitted since the start,
// the current window included.
func (w *fixedWindow) allowance() int64 { return w.allowed + w.windowMax }

// has reports whether n more fit in the current window.
func (w *fixedWindow) has(n int64) bool { return w.count+n <= w.limit }

// untilReset returns how long from now until the next window starts.
func (w *fixedWindow) untilReset(now time.Time) time.Duration {
	next := (w.windowIndex(now) + 1) * int64(w.size)
	return time.Duration(next - now.UnixNano())
}
