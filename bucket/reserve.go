package bucket

// Reservations.
//
// A reservation debits its cost now, even when the balance is short, and
// becomes valid at the exact instant the balance would have covered it
// (RetryIn): the caller sleeps until then and proceeds without asking again.
// Requests that arrive later queue behind it, since the balance it drove
// below zero must refill first. This is the token bucket's "virtual
// scheduling" form: every grant and every reservation is valid at the
// instant the bucket, debited by everything before it, would have held it,
// so the usage counted at valid instants in any window [a, b] is at most
// the capacity plus what the bucket earns over b−a.

// MinBalance is the lowest balance a reservation may leave, in millitokens
// (−10^15, that is −MaxCapacity tokens). With MaxCapacity it keeps every
// balance within ±10^15 millitokens, below 2^53. A reservation that would
// go below it is denied with the wait until it would not.
const MinBalance = -MaxCapacity * Milli

// MaxReserveMs is the longest wait a reservation may take: 24 hours, in
// milliseconds.
const MaxReserveMs = 24 * 3600 * 1000

// Reserve debits, at now, a reservation of cost millitokens valid at
// validAt (Unix milliseconds, at or after the instant RetryIn gives for
// cost; for a reservation of several buckets, the latest of those
// instants). It returns the new state and true, or s and false when the
// balance would fall below MinBalance (then ReserveBound gives the wait).
// The state's Reserved moves to validAt if that is later.
//
// The usage happens at validAt, so the bucket must not earn, by then,
// tokens that the capacity would have cut off had cost been used then:
// besides cost, Reserve debits what the balance would earn by validAt
// above capacity − cost (nothing for a single-bucket reservation, which
// is valid the moment its balance reaches cost; for one of several
// buckets, it defers the burst of a bucket that waits less than another,
// never its sustained rate). Concurrent buckets
// cannot be reserved: Reserve returns s and false for them (the store
// rejects them first, see store.Bucket.CheckReservable).
func Reserve(l Limits, s State, now, cost, validAt int64) (State, bool) {
	if l.Amount <= 0 {
		return s, false
	}
	r := Refill(l, s, now)
	debit := cost
	if start := max(r.Last, r.Until); validAt > start {
		earn := min(mulDiv(validAt-start, l.Amount, l.Period), 4*MaxCapacity*Milli)
		debit += max(0, r.Tokens+earn-l.Capacity)
	}
	if r.Tokens-debit < MinBalance {
		return s, false
	}
	r.Tokens -= debit
	r.Reserved = max(r.Reserved, validAt)
	return r, true
}

// ReserveBound returns how many milliseconds after now a reservation of
// cost millitokens would leave a balance at or above MinBalance; at least
// 1 ms.
func ReserveBound(l Limits, s State, now, cost int64) int64 {
	return max(RetryIn(l, s, now, cost+MinBalance), 1)
}

// ReservedDebt returns an upper bound, in millitokens, on what reservations
// still owe the bucket at now: what it earns from now until the latest
// reservation's valid instant (s.Reserved), 0 once that has passed. The
// balance below zero that a reservation creates refills by that instant, so
// no more than this much of a negative balance is owed to reservations.
// It saturates at -MinBalance.
func ReservedDebt(l Limits, s State, now int64) int64 {
	if l.Amount <= 0 || s.Reserved <= now {
		return 0
	}
	return min(ceilMulDiv(s.Reserved-now, l.Amount, l.Period), -MinBalance)
}

// EffectiveFloor returns the lowest balance a clamp may leave at now: the
// configured floor lowered by ReservedDebt, and never below MinBalance.
// Adjust clamps at most to it, so that the debt reservations created is
// never forgiven and the tokens they reserved are never handed out twice.
func EffectiveFloor(l Limits, s State, now int64) int64 {
	return max(l.Floor-ReservedDebt(l, s, now), MinBalance)
}

// Unreserve cancels, at now, a reservation of cost millitokens valid at
// validAt (both times in Unix milliseconds). It returns the new state and
// the millitokens given back. A reservation already valid (now at or after
// validAt) gives nothing back: it is in use; nor does one the bucket never
// had (s.Reserved before validAt). Otherwise it gives back its
// cost minus what later reservations relied on — the tokens the bucket
// earns between validAt and s.Reserved, rounded up — and the balance never
// exceeds the capacity. This is the rule of golang.org/x/time/rate's
// Reservation.Cancel, made exact in integers and conservative in rounding:
// nothing a cancellation gives back can let usage counted at valid instants
// exceed the capacity plus the refill over any window. s.Reserved is left
// as it is, which only makes later cancellations give back less.
func Unreserve(l Limits, s State, now, cost, validAt int64) (State, int64) {
	if l.Amount <= 0 || now >= validAt || cost <= 0 || s.Reserved < validAt {
		// A bucket whose latest reservation is valid before validAt never
		// had this one: it was deleted and created again since.
		return s, 0
	}
	relied := int64(0)
	if s.Reserved > validAt {
		relied = ceilMulDiv(s.Reserved-validAt, l.Amount, l.Period)
	}
	back := cost - relied
	if back <= 0 {
		return s, 0
	}
	r := Refill(l, s, now)
	if r.Tokens+back > l.Capacity {
		back = max(l.Capacity-r.Tokens, 0)
	}
	r.Tokens += back
	return r, back
}
