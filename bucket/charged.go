package bucket

// Settlements and queued reservations.
//
// A reservation is valid at the instant its bucket, debited by everything
// before it, earns back its cost, and its caller proceeds then without
// asking again. A settlement made later that lowers the balance — a charge
// above the estimate (Adjust), a vendor's lower report (Sync), a penalty
// (Penalize), a cooldown (Cooldown) — lowers the balance at every later
// instant by the same amount D, so every reservation still pending becomes
// valid D/rate later. Each bucket counts these changes in State.Charged;
// a reservation reads the counter when it is made, and its caller reads it
// again at the valid instant: a positive difference is debt the
// reservation must wait out (ChargeDelay). Refunds in between count
// negatively and offset charges; a negative difference lets the
// reservation proceed that amount's refill sooner. A clamp at the capacity only ever makes
// the count larger than the real loss, so the delay errs late, never early.

// Bounds of the settlement counter.
const (
	// ChargedSpan is the period of State.Charged, 2^52 millitokens: the
	// counter is kept in [−ChargedSpan/2, ChargedSpan/2), well below 2^53,
	// and wraps around. A difference between two readings (ChargedSince)
	// is exact while the net change between them stays below
	// ChargedSpan/2, about 2.25×10^12 tokens; one settlement changes it by
	// at most 2×10^15 millitokens (the balance's range), and a cooldown's
	// forgone refill counts at most MaxForgone.
	ChargedSpan = 1 << 52
	// MaxForgone caps what a cooldown adds to State.Charged for the refill
	// it forgoes (2^50 millitokens, about 1.1×10^12 tokens). Only a bucket
	// that earns more than that during one cooldown reaches it.
	MaxForgone = 1 << 50
)

// WrapCharged returns c brought into [−ChargedSpan/2, ChargedSpan/2)
// modulo ChargedSpan.
func WrapCharged(c int64) int64 {
	const half = ChargedSpan / 2
	m := (c + half) % ChargedSpan
	if m < 0 {
		m += ChargedSpan
	}
	return m - half
}

// ChargedSince returns the net change that settlements made to a bucket's
// balance between two readings of State.Charged, recorded then current:
// positive when they charged more than they refunded. It is exact while
// that change is within ±ChargedSpan/2.
func ChargedSince(recorded, current int64) int64 {
	return WrapCharged(current - recorded)
}

// ChargeDelay returns how many milliseconds a reservation on a bucket with
// limits l must wait, past its valid instant, for the bucket to earn back
// extra millitokens charged since the reservation was made: ceil(extra ×
// Period / Amount), 0 for extra ≤ 0 or a concurrent bucket, saturating at
// MaxRetryMs.
func ChargeDelay(l Limits, extra int64) int64 {
	if extra <= 0 || l.Amount <= 0 {
		return 0
	}
	return min(ceilMulDiv(extra, l.Period, l.Amount), MaxRetryMs)
}

// cooldownForgone returns the refill a cooldown until the instant until,
// started at now on the refilled state r, makes the bucket forgo: its rate
// times the time by which the cooldown ends later than before (rounded
// up), at most MaxForgone.
func cooldownForgone(l Limits, r State, now, until int64) int64 {
	from := max(now, r.Until)
	if l.Amount <= 0 || until <= from {
		return 0
	}
	return min(ceilMulDiv(until-from, l.Amount, l.Period), MaxForgone)
}
