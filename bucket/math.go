// Package bucket is Sluice's token-bucket arithmetic: pure integer functions
// with no I/O, no clock and no locks, shared by every store.
//
// Tokens are held as millitokens (int64, one token = 1000 millitokens) and time
// as milliseconds since the Unix epoch. A time-based bucket refills by the
// exact fraction Amount/Period (millitokens per millisecond), so a rate such as
// 100 tokens per minute never becomes the rounded decimal 1.667/s.
//
// Every function takes the stored State and the current time and returns a new
// State; none of them mutates its arguments. Products that could exceed 64 bits
// are computed with 128-bit intermediates (math/bits), and Limits.Validate
// bounds every input so that every result fits in an int64 and, because every
// stored value stays below 2^53, is exactly representable as an IEEE double
// (the Lua port in the Redis store and DynamoDB's decimal numbers rely on it).
//
// # Drift compensation
//
// Lazy refill adds floor(elapsed*Amount/Period) millitokens and advances the
// refill timestamp by ceil(added*Period/Amount) milliseconds: exactly the time
// it takes to earn what was added, rounded up. Rounding the time up (rather
// than down, as zae-limiter does) guarantees that no millisecond is credited
// twice: a bucket never earns more than Amount*elapsed/Period over any
// interval, and each write forgoes less than one millitoken. Rounding down
// would re-credit up to Amount/Period millitokens per write, which for a
// 1M-tokens-per-minute bucket is 16 whole tokens on every acquisition.
package bucket

import "math/bits"

// Milli is the number of millitokens in one token.
const Milli = 1000

// Bounds that Validate enforces. They keep every intermediate of the math in
// range and every stored value below 2^53.
const (
	// MaxCapacity is the largest capacity, refill amount, cost or debt, in
	// tokens (10^12).
	MaxCapacity = 1_000_000_000_000
	// MaxPeriodMs is the longest refill period: 366 days, in milliseconds.
	MaxPeriodMs = 366 * 24 * 3600 * 1000
	// MaxFillMs is the longest time a bucket may take to refill from its debt
	// floor to full capacity: ten years, in milliseconds.
	MaxFillMs = 10 * 366 * 24 * 3600 * 1000
	// MaxRetryMs caps a computed retry-in delay (100 years, in milliseconds).
	// Only a clock running far behind the stored state can reach it.
	MaxRetryMs = 100 * 366 * 24 * 3600 * 1000
	// MaxTimeMs is the largest timestamp the math accepts: 2^53-1 ms, about
	// the year 287396.
	MaxTimeMs = 1<<53 - 1
)

// mulDiv returns floor(a*b/c) for a, b >= 0 and c > 0, saturating at
// MaxInt64 when the quotient does not fit.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(q)
}

// ceilMulDiv returns ceil(a*b/c) for a, b >= 0 and c > 0, saturating at
// MaxInt64 when the quotient does not fit.
func ceilMulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 1<<63 - 1
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	if q > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(q)
}

// prodLess reports whether a*b < c*d for non-negative operands, exactly.
func prodLess(a, b, c, d int64) bool {
	h1, l1 := bits.Mul64(uint64(a), uint64(b))
	h2, l2 := bits.Mul64(uint64(c), uint64(d))
	return h1 < h2 || (h1 == h2 && l1 < l2)
}

// State is a bucket's mutable state.
type State struct {
	// Tokens is the balance in millitokens at time Last. It is at most the
	// capacity and may be negative (debt), down to MinBalance.
	Tokens int64
	// Last is the refill timestamp in Unix milliseconds: the instant up to
	// which refill has been credited.
	Last int64
	// Until is the end of a cooldown in Unix milliseconds, 0 when the bucket
	// has never had one (see Cooldown). Before Until the bucket earns
	// nothing and grants nothing; it earns again from Until on. A past
	// Until changes nothing and is kept, so that a state can be shown with
	// its last cooldown.
	Until int64
	// Reserved is the latest valid instant, in Unix milliseconds, of any
	// reservation made on the bucket (see Reserve), 0 when it never had
	// one. Cancelling a reservation valid before it gives back only what
	// later reservations did not rely on (see Unreserve), and while it is
	// in the future the balance below zero that reservations owe is never
	// forgiven by a clamp (see ReservedDebt).
	Reserved int64
	// Charged is the net change, in millitokens, that settlements after the
	// fact made to the balance (see ChargedSince): a charge adds, a refund
	// subtracts. Reservations compare it before and after their valid
	// instant to find the debt they must wait out. It wraps (see
	// WrapCharged), so only differences between two readings mean anything.
	Charged int64
}

// Refill returns s with the tokens earned between s.Last and now added,
// capped at the capacity. A time at or before s.Last changes nothing, so a
// clock that runs backwards never removes or adds tokens. Concurrent buckets
// (Amount 0) never refill. A bucket in a cooldown earns nothing before
// s.Until, and earns from s.Until on (the refill timestamp moves to s.Until
// first).
func Refill(l Limits, s State, now int64) State {
	if l.Amount <= 0 || now <= s.Last || now <= s.Until {
		return s
	}
	if s.Last < s.Until {
		s.Last = s.Until
	}
	if s.Tokens >= l.Capacity {
		return State{Tokens: l.Capacity, Last: now, Until: s.Until, Reserved: s.Reserved, Charged: s.Charged}
	}
	need := l.Capacity - s.Tokens
	elapsed := now - s.Last
	if !prodLess(elapsed, l.Amount, need, l.Period) {
		// Enough time has passed to fill the bucket.
		return State{Tokens: l.Capacity, Last: now, Until: s.Until, Reserved: s.Reserved, Charged: s.Charged}
	}
	add := mulDiv(elapsed, l.Amount, l.Period) // < need
	if add == 0 {
		return s
	}
	used := ceilMulDiv(add, l.Period, l.Amount) // <= elapsed
	return State{Tokens: s.Tokens + add, Last: s.Last + used, Until: s.Until, Reserved: s.Reserved, Charged: s.Charged}
}

// Available returns the balance at now in millitokens, without changing
// anything.
func Available(l Limits, s State, now int64) int64 {
	return Refill(l, s, now).Tokens
}

// Take tries to debit cost millitokens at now. On success it returns the new
// state, 0 and true. On denial it returns s unchanged, the exact wait in
// milliseconds (see RetryIn) and false; a denial never consumes anything and
// writes nothing. For a concurrent bucket a denial's wait is 0: the store
// supplies a hint with ConcurrentRetry. Nothing is granted before the end
// of a cooldown (s.Until).
func Take(l Limits, s State, now, cost int64) (State, int64, bool) {
	r := Refill(l, s, now)
	if r.Tokens >= cost && now >= s.Until {
		r.Tokens -= cost
		return r, 0, true
	}
	if l.Amount <= 0 {
		return s, 0, false
	}
	return s, RetryIn(l, s, now, cost), false
}

// RetryIn returns how many milliseconds after now the bucket in state s will
// hold cost millitokens, assuming nothing else changes it: waiting exactly
// that long makes Take succeed, and one millisecond less does not. It returns
// 0 when cost is already available and for concurrent buckets, and saturates
// at MaxRetryMs. During a cooldown the wait runs to s.Until and then for as
// long as the bucket takes to earn cost from there.
func RetryIn(l Limits, s State, now, cost int64) int64 {
	if l.Amount <= 0 {
		return 0
	}
	start := max(s.Last, s.Until)
	if s.Tokens >= cost || s.Tokens >= l.Capacity {
		return min(max(s.Until-now, 0), MaxRetryMs)
	}
	need := cost - s.Tokens
	// The smallest whole number of ms after start that earns need.
	e := ceilMulDiv(need, l.Period, l.Amount)
	if e > MaxRetryMs {
		return MaxRetryMs
	}
	w := start + e - now
	switch {
	case w <= 0:
		return 0
	case w > MaxRetryMs:
		return MaxRetryMs
	}
	return w
}

// Adjust settles an estimate: a positive delta charges delta more
// millitokens, a negative delta refunds -delta. The balance is refilled to now
// first; a refund never lifts it above the capacity. During a cooldown (now
// before s.Until) a refund lifts the balance at most to zero, so that the
// bucket resumes at its refill rate and not in a burst. It returns the new
// state and the change actually applied to the balance (positive for a
// charge).
//
// A charge is usage that happened, so debt is never forgiven: the floor
// (-Config.Debt) bounds what one charge adds, not the debt. One charge
// takes the balance at most to the floor below zero, or, when the balance
// is already negative, at most the floor's depth below where it was; the
// floor is also lowered by what outstanding reservations owe
// (ReservedDebt), so that a charge never hands reserved tokens out a
// second time. The balance never goes below MinBalance.
func Adjust(l Limits, s State, now, delta int64) (State, int64) {
	r := Refill(l, s, now)
	before := r.Tokens
	ceiling := l.Capacity
	if now < r.Until {
		ceiling = min(ceiling, max(before, 0))
	}
	floor := min(EffectiveFloor(l, r, now), before, max(min(before, 0)+l.Floor, MinBalance))
	t := before - delta
	if t < floor {
		t = floor
	}
	if t > ceiling {
		t = ceiling
	}
	r.Tokens = t
	r.Charged = WrapCharged(r.Charged + before - t)
	return r, before - t
}

// Restore returns amount millitokens to a concurrent bucket, as when a lease
// is released or reclaimed. The balance never exceeds the capacity; capped
// reports that it would have (the capacity guard, counted as
// already_capped by the reconciler).
func Restore(l Limits, s State, amount int64) (State, bool) {
	t := s.Tokens + amount
	if t > l.Capacity {
		s.Tokens = l.Capacity
		return s, true
	}
	s.Tokens = t
	return s, false
}

// Penalize refills the bucket to now and then multiplies a positive balance
// by factorMilli/1000 (rounding down), as after a vendor 429. A balance at or
// below zero is left alone. factorMilli must be in [0, 1000].
func Penalize(l Limits, s State, now, factorMilli int64) State {
	r := Refill(l, s, now)
	if r.Tokens > 0 {
		t := r.Tokens * factorMilli / 1000
		r.Charged = WrapCharged(r.Charged + r.Tokens - t)
		r.Tokens = t
	}
	return r
}

// Cooldown starts a cooldown until the instant until (Unix milliseconds), as
// after a vendor's 429 with a retry-after: the bucket is refilled to now,
// its balance is lowered to zero if it was positive (debt is kept), and
// nothing is granted before until; from until on it earns at its refill
// rate, so grants resume one at a time rather than in a burst. A cooldown
// never shortens one already running: the later end wins. An until at or
// before now only refills. Concurrent buckets are not cooled (the store
// rejects them, see store.Bucket.CheckPenalizable).
func Cooldown(l Limits, s State, now, until int64) State {
	r := Refill(l, s, now)
	if until <= now {
		return r
	}
	forgone := cooldownForgone(l, r, now, until)
	r.Charged = WrapCharged(r.Charged + max(r.Tokens, 0) + forgone)
	r.Tokens = min(r.Tokens, 0)
	r.Until = max(r.Until, until)
	return r
}

// Sync lowers the balance to remaining millitokens, as reported by a
// vendor's rate-limit headers: the bucket is refilled to now and its
// balance becomes min(balance, remaining). It never raises the balance, so
// a vendor that reports more than Sluice holds changes nothing, and it
// never lowers it below the floor. remaining must be at least zero.
func Sync(l Limits, s State, now, remaining int64) State {
	r := Refill(l, s, now)
	if remaining < r.Tokens {
		t := max(remaining, l.Floor)
		r.Charged = WrapCharged(r.Charged + r.Tokens - t)
		r.Tokens = t
	}
	return r
}

// ConcurrentRetry is the documented RETRY_IN hint for a denied concurrent
// dimension: the time until its earliest lease expires (0 when it has none),
// capped by poll, and never less than one millisecond.
func ConcurrentRetry(now, earliestExpiry, poll int64) int64 {
	w := poll
	if earliestExpiry > now && earliestExpiry-now < w {
		w = earliestExpiry - now
	}
	if w < 1 {
		w = 1
	}
	return w
}

// Reconfigure returns the state of a bucket whose limits change from old to
// next at now. A reset fills it to the new capacity. A concurrent bucket
// kept concurrent holds capacity minus what is held, so its balance moves
// by the change of capacity, possibly below zero until holders release.
// Any other change refills under the old limits and clamps to the new
// capacity. It never raises a balance: a debt, even below the new floor,
// is usage that happened (or tokens that reservations promised), and a
// lower limit or maximum debt only stops later settlements at the new
// floor.
func Reconfigure(old, next Limits, s State, now int64, reset bool) State {
	r := Refill(old, s, now)
	switch {
	case reset:
		// A reset fills the bucket and ends any cooldown. It forgives the
		// debt of pending reservations, so cancelling one of them must
		// give nothing back: the latest valid instant moves on by the
		// time the bucket takes to earn its capacity (see Unreserve).
		return State{Tokens: next.Capacity, Last: now, Reserved: forgetReserved(next, r.Reserved, now), Charged: r.Charged}
	case old.Type == Concurrent && next.Type == Concurrent:
		r.Tokens = min(r.Tokens+next.Capacity-old.Capacity, next.Capacity)
	default:
		r.Tokens = min(r.Tokens, next.Capacity)
		if old.Capacity != next.Capacity || old.Amount != next.Amount || old.Period != next.Period {
			// Pending reservations' schedule was made under the old
			// limits: cancelling them gives nothing back.
			r.Reserved = forgetReserved(next, r.Reserved, now)
		}
	}
	return r
}

// forgetReserved returns the latest reservation instant to keep when a
// reset or a change of limits makes pending reservations' debts
// meaningless: moved on by the time the bucket takes to earn its capacity,
// so that cancelling a reservation made before gives nothing back (see
// Unreserve). Without pending reservations it is kept as it is.
func forgetReserved(next Limits, reserved, now int64) int64 {
	if reserved <= now || next.Amount <= 0 {
		return reserved
	}
	return min(reserved+ceilMulDiv(next.Capacity, next.Period, next.Amount), MaxTimeMs)
}

// Align returns the decision time for a caller whose clock reads now on a
// time-based bucket in state s, and how many milliseconds that clock must
// still advance before the caller may be admitted (0 when it may be now).
// All times are in Unix milliseconds; maxSkew is the largest clock
// disagreement tolerated. A concurrent bucket (Amount 0) never refills, so
// for it Align returns now and 0.
//
// The refill timestamp s.Last never moves backwards, whoever asks: a
// caller at or after s.Last decides at now, and every other caller decides
// at s.Last, where the bucket earns nothing. The refill a bucket is
// credited therefore never exceeds its rate times the latest time any
// clock reported, minus its start. A caller behind s.Last by at most
// maxSkew is served at s.Last, so a host whose clock runs slightly slow
// gets the same balance and the same exact wait as a host on time. A
// caller behind by more than maxSkew gets a wait above zero: the time until
// its clock is within maxSkew of s.Last. Admission operations (Take,
// Reserve) must refuse it, changing nothing, with SkewRetry as the wait;
// operations that must never be lost (settlements, penalties, cooldowns,
// syncs, cancellations, reconfigurations) apply at the returned time
// instead, without refill.
func Align(l Limits, s State, now, maxSkew int64) (at, wait int64) {
	if l.Amount <= 0 || now >= s.Last {
		return now, 0
	}
	return s.Last, max(s.Last-maxSkew-now, 0)
}

// SkewRetry returns the wait to report when an admission of cost
// millitokens is refused because the caller's clock is behind the bucket
// by more than the maximum skew (Align's wait, above zero): that wait, or
// longer when the bucket, decided at at, needs longer to hold cost.
// It saturates at MaxRetryMs.
func SkewRetry(l Limits, s State, at, wait, cost int64) int64 {
	return min(max(wait, RetryIn(l, s, at, cost)), MaxRetryMs)
}
