package bucket

import (
	"testing"
	"time"
)

// fuzzConfig builds a valid Config from fuzz input, or reports false.
func fuzzConfig(kind uint8, capacity, amount int64, periodMs int64, debt int64) (Config, bool) {
	c := Config{Type: LimitType(kind%3 + 1), Capacity: capacity, MaxDebt: debt}
	if c.Type != Concurrent {
		c.RefillAmount = amount
		c.RefillPeriod = time.Duration(periodMs) * time.Millisecond
	}
	return c, c.Validate() == nil
}

func clampTime(t int64) int64 {
	if t < 0 {
		t = -t
	}
	return t % (MaxTimeMs + 1)
}

// FuzzInvariants drives a bucket through a sequence of operations and checks
// that the balance stays within [floor, capacity], that no step overflows,
// and that time going backwards changes nothing.
func FuzzInvariants(f *testing.F) {
	f.Add(uint8(0), int64(100), int64(100), int64(60_000), int64(0), int64(1_700_000_000_000), []byte{1, 2, 3, 200, 7})
	f.Add(uint8(1), int64(1_000_000), int64(1_000_000), int64(60_000), int64(-1), int64(5), []byte{255, 0, 9})
	f.Add(uint8(2), int64(3), int64(0), int64(0), int64(0), int64(0), []byte{1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, kind uint8, capacity, amount, periodMs, debt, start int64, ops []byte) {
		c, ok := fuzzConfig(kind, capacity, amount, periodMs, debt)
		if !ok {
			return
		}
		l := c.Limits()
		now := clampTime(start)
		s := State{Tokens: l.Capacity, Last: now}
		for i, op := range ops {
			step := int64(op) * int64(op) * int64(i+1)
			switch op % 5 {
			case 0: // time goes backwards: nothing may change
				back := now - step
				if got := Refill(l, s, back); back <= s.Last && got != s {
					t.Fatalf("Refill at %d before Last %d changed %+v to %+v", back, s.Last, s, got)
				}
			case 1:
				now += step
				cost := (int64(op)%c.Capacity + 1) * Milli
				next, retry, ok := Take(l, s, now, cost)
				if !ok && next != s {
					t.Fatalf("denied Take changed state %+v to %+v", s, next)
				}
				if retry < 0 || retry > MaxRetryMs {
					t.Fatalf("retry %d out of range", retry)
				}
				s = next
			case 2:
				now += step
				delta := int64(op) * int64(op) * Milli * int64(i+1)
				before := Refill(l, s, now).Tokens
				next, applied := Adjust(l, s, now, delta)
				// Debt is never forgiven: one charge takes all of delta
				// down to the floor's depth below zero, or below a
				// balance already in debt (never below MinBalance).
				room := max(before-max(min(before, 0)+l.Floor, MinBalance), 0)
				if applied != min(delta, room) || next.Tokens != before-applied {
					t.Fatalf("after op %d: charge of %d from %d applied %d, leaving %d; want %d applied", i, delta, before, applied, next.Tokens, min(delta, room))
				}
				s = next
			case 3:
				now += step
				s, _ = Adjust(l, s, now, -int64(op)*Milli)
			case 4:
				now += step
				s = Penalize(l, s, now, int64(op)*4%1001)
			}
			if s.Tokens > l.Capacity || s.Tokens < MinBalance {
				t.Fatalf("after op %d: tokens %d outside [%d, %d]", i, s.Tokens, MinBalance, l.Capacity)
			}
			if s.Last > now && op%5 != 0 {
				t.Fatalf("after op %d: Last %d is after now %d", i, s.Last, now)
			}
		}
	})
}

// FuzzRetryInExact checks that waiting the returned delay makes the same
// request succeed and that one millisecond less does not.
func FuzzRetryInExact(f *testing.F) {
	f.Add(uint8(0), int64(100), int64(100), int64(60_000), int64(0), int64(0), int64(0), int64(1), int64(0))
	f.Add(uint8(1), int64(1_000_000), int64(7), int64(13), int64(0), int64(-5_000_000), int64(99), int64(1_000_000), int64(3))
	f.Add(uint8(1), int64(90), int64(90), int64(60_000), int64(0), int64(-90_000), int64(10_000), int64(90), int64(9_000))
	f.Fuzz(func(t *testing.T, kind uint8, capacity, amount, periodMs, debt, tokens, last, cost, now int64) {
		c, ok := fuzzConfig(kind, capacity, amount, periodMs, debt)
		if !ok || c.Type == Concurrent {
			return
		}
		l := c.Limits()
		if tokens < MinBalance || tokens > l.Capacity {
			return
		}
		if cost < 1 || cost > c.Capacity {
			return
		}
		cost *= Milli
		s := State{Tokens: tokens, Last: clampTime(last)}
		now = clampTime(now)
		_, retry, ok := Take(l, s, now, cost)
		if ok {
			return
		}
		if retry < 1 {
			t.Fatalf("denied with retry %d < 1", retry)
		}
		if retry == MaxRetryMs {
			return // saturated: not exact by design
		}
		if _, _, ok := Take(l, s, now+retry, cost); !ok {
			t.Fatalf("Take after waiting retry %d ms still denied (state %+v, now %d, cost %d)", retry, s, now, cost)
		}
		if _, _, ok := Take(l, s, now+retry-1, cost); ok {
			t.Fatalf("Take 1 ms before retry %d succeeded (state %+v, now %d, cost %d)", retry, s, now, cost)
		}
	})
}

// FuzzGrantedWithinRate checks the defining property of a token bucket: over
// any window starting full, granted <= capacity + amount*window/period.
func FuzzGrantedWithinRate(f *testing.F) {
	f.Add(int64(100), int64(100), int64(60_000), int64(1_000), []byte{1, 0, 0, 3, 9, 200})
	f.Add(int64(1_000_000), int64(1_000_000), int64(60_000), int64(7), []byte{1, 1, 1, 1, 1, 1, 1, 1})
	f.Add(int64(3), int64(2), int64(3), int64(1), []byte{0, 0, 0, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, capacity, amount, periodMs, start int64, gaps []byte) {
		c, ok := fuzzConfig(1, capacity, amount, periodMs, 0)
		if !ok {
			return
		}
		l := c.Limits()
		t0 := clampTime(start) % (1 << 50)
		s := State{Tokens: l.Capacity, Last: t0}
		now := t0
		var granted int64
		for i, g := range gaps {
			now += int64(g)
			cost := (int64(i)%c.Capacity + 1) * Milli
			var ok bool
			s, _, ok = Take(l, s, now, cost)
			if ok {
				granted += cost
			}
			bound := l.Capacity + mulDiv(now-t0, l.Amount, l.Period)
			if granted > bound {
				t.Fatalf("granted %d millitokens by %d ms, above capacity+rate*window = %d", granted, now-t0, bound)
			}
		}
	})
}

// FuzzCooldown checks a cooldown from any reachable state: nothing is
// granted before its end, a refund during it lifts the balance at most to
// zero, a sync never raises the balance, and RETRY_IN stays exact: waiting
// it succeeds and one millisecond less does not.
func FuzzCooldown(f *testing.F) {
	f.Add(uint8(0), int64(100), int64(100), int64(60_000), int64(0), int64(50_000), int64(0), int64(1000), int64(5000), int64(1), int64(0))
	f.Add(uint8(1), int64(1_000_000), int64(7), int64(13), int64(0), int64(-5_000_000), int64(99), int64(100), int64(7), int64(1_000_000), int64(3))
	f.Add(uint8(1), int64(90), int64(90), int64(60_000), int64(-1), int64(0), int64(10_000), int64(9_000), int64(86_400_000), int64(90), int64(60_000))
	f.Fuzz(func(t *testing.T, kind uint8, capacity, amount, periodMs, debt, tokens, last, now, length, cost, later int64) {
		c, ok := fuzzConfig(kind, capacity, amount, periodMs, debt)
		if !ok || c.Type == Concurrent || tokens < MinBalance || tokens > c.Limits().Capacity || cost < 1 || cost > c.Capacity {
			return
		}
		l := c.Limits()
		s := State{Tokens: tokens, Last: clampTime(last) % (1 << 50)}
		now = s.Last + clampTime(now)%(1<<40)
		until := now + 1 + clampTime(length)%(24*3600*1000)
		s = Cooldown(l, s, now, until)
		if s.Tokens > 0 || s.Until < until {
			t.Fatalf("Cooldown: %+v, want tokens <= 0 and Until >= %d", s, until)
		}
		at := now + clampTime(later)%(until-now+1)
		cost *= Milli
		if _, _, ok := Take(l, s, at, cost); ok && at < s.Until {
			t.Fatalf("granted at %d, before the cooldown's end %d (state %+v)", at, s.Until, s)
		}
		if r, _ := Adjust(l, s, at, -cost); at < s.Until && r.Tokens > max(Refill(l, s, at).Tokens, 0) {
			t.Fatalf("refund during the cooldown lifted %+v to %+v", s, r)
		}
		if r := Sync(l, s, at, cost); r.Tokens > Refill(l, s, at).Tokens {
			t.Fatalf("Sync raised %+v to %+v", Refill(l, s, at), r)
		}
		_, retry, ok := Take(l, s, at, cost)
		if ok || retry == MaxRetryMs {
			return
		}
		if _, _, ok := Take(l, s, at+retry, cost); !ok {
			t.Fatalf("Take after waiting retry %d ms still denied (state %+v, at %d, cost %d)", retry, s, at, cost)
		}
		if _, _, ok := Take(l, s, at+retry-1, cost); ok {
			t.Fatalf("Take 1 ms before retry %d succeeded (state %+v, at %d, cost %d)", retry, s, at, cost)
		}
	})
}
