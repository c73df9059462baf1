package bucket

import (
	"testing"
	"time"
)

func TestAlign(t *testing.T) {
	rpm := PerPeriod(Requests, 60, time.Minute).Limits()
	conc := Config{Type: Concurrent, Capacity: 3}.Limits()
	s := State{Tokens: 5_000, Last: 100_000, Until: 100_500}
	tests := []struct {
		name     string
		l        Limits
		now      int64
		at, wait int64
	}{
		{"ahead decides at its own time", rpm, 100_700, 100_700, 0},
		{"on time", rpm, 100_000, 100_000, 0},
		{"slightly behind decides at Last", rpm, 99_500, 100_000, 0},
		{"behind by exactly the skew", rpm, 99_000, 100_000, 0},
		{"1 ms beyond the skew waits 1 ms", rpm, 98_999, 100_000, 1},
		{"far behind waits until within the skew", rpm, 90_000, 100_000, 9_000},
		{"concurrent never aligns", conc, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, wait := Align(tt.l, s, tt.now, 1000)
			if at != tt.at || wait != tt.wait {
				t.Errorf("Align(now %d) = %d, %d; want %d, %d", tt.now, at, wait, tt.at, tt.wait)
			}
		})
	}
}

func TestSkewRetry(t *testing.T) {
	rpm := PerPeriod(Requests, 60, time.Minute).Limits() // 1 token a second
	tests := []struct {
		name string
		s    State
		wait int64
		cost int64
		want int64
	}{
		{"tokens available: the skew wait", State{Tokens: 10_000, Last: 50_000}, 9_000, 1_000, 9_000},
		{"tokens need longer", State{Tokens: 0, Last: 50_000}, 300, 2_000, 2_000},
		{"cooldown ends later", State{Tokens: 5_000, Last: 50_000, Until: 60_000}, 300, 1_000, 10_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SkewRetry(rpm, tt.s, tt.s.Last, tt.wait, tt.cost); got != tt.want {
				t.Errorf("SkewRetry = %d, want %d", got, tt.want)
			}
		})
	}
}

// admit is an admission under the skew rule: Align, a refusal with
// SkewRetry beyond the maximum skew, else Take at the decision time.
func admit(l Limits, s State, now, skew, cost int64) (State, int64, bool) {
	at, wait := Align(l, s, now, skew)
	if wait > 0 {
		return s, SkewRetry(l, s, at, wait, cost), false
	}
	return Take(l, s, at, cost)
}

// TestAlternatingClocksEarnOnce alternates two hosts whose clocks disagree
// on a 40-token bucket: the grants never exceed the capacity plus what the
// bucket earns up to the fastest clock, and the refill timestamp never
// moves backwards.
func TestAlternatingClocksEarnOnce(t *testing.T) {
	l := PerPeriod(Requests, 40, time.Minute).Limits() // 1 token per 1.5 s
	for _, off := range []int64{500, 1_100, 2_000, 10_000} {
		s := State{Tokens: l.Capacity, Last: 0}
		grants, last := int64(0), int64(0)
		const calls = 2_000
		var t0 int64
		for i := range calls {
			t0 = int64(i) * 10 // 10 ms apart: 20 s in all
			now := t0
			if i%2 == 1 {
				now += off
			}
			next, retry, ok := admit(l, s, now, 1_000, Milli)
			if !ok && retry <= 0 {
				t.Fatalf("offset %d: denied with retry %d", off, retry)
			}
			if next.Last < last {
				t.Fatalf("offset %d: Last moved back from %d to %d", off, last, next.Last)
			}
			if ok {
				grants++
			}
			s, last = next, next.Last
		}
		allowed := 40 + (t0+off)*40/60_000
		if grants > allowed {
			t.Errorf("offset %d ms: %d grants of %d calls, want at most %d", off, grants, calls, allowed)
		}
	}
}

// FuzzSkewedClocks runs operations from hosts whose clocks disagree by
// offsets inside and far outside the maximum skew, and checks that the
// refill timestamp never decreases and that the refill credited never
// exceeds the rate times the latest time any clock reported, minus the
// start.
func FuzzSkewedClocks(f *testing.F) {
	f.Add(uint8(0), int64(40), int64(40), int64(60_000), int64(0), []byte{0x01, 0x61, 0x01, 0x61, 0x01, 0x61, 0x01, 0x61})
	f.Add(uint8(1), int64(1000), int64(100), int64(1000), int64(-1), []byte{0x21, 0xe2, 0x23, 0x84, 0x45, 0xa6, 0x27, 0xc1})
	f.Add(uint8(0), int64(5), int64(1), int64(1000), int64(3), []byte{0xe1, 0x01, 0xe3, 0x03, 0xe4, 0x04, 0xe5, 0x05, 0xe1})
	offsets := [8]int64{0, 400, -400, 1_100, -1_100, 2_000, -10_000, 10_000}
	const skew = 1_000
	f.Fuzz(func(t *testing.T, kind uint8, capacity, amount, periodMs, debt int64, ops []byte) {
		c, ok := fuzzConfig(kind, capacity, amount, periodMs, debt)
		if !ok || c.Type == Concurrent {
			return
		}
		l := c.Limits()
		const start = 1_000_000
		s := State{Tokens: l.Capacity, Last: start}
		base, seen, earned := int64(start), int64(start), int64(0)
		for _, op := range ops {
			base += int64(op&0x1f) * 97
			now := base + offsets[op>>5]
			seen = max(seen, now)
			at, wait := Align(l, s, now, skew)
			cost := (int64(op)%c.Capacity + 1) * Milli
			var next State
			switch op % 5 {
			case 0, 1: // admission
				var retry int64
				next, retry, ok = admit(l, s, now, skew, cost)
				if wait > 0 && (ok || retry < wait || next != s) {
					t.Fatalf("caller %d ms behind Last %d was not refused: ok %v, retry %d", s.Last-now, s.Last, ok, retry)
				}
			case 2:
				next, _ = Adjust(l, s, at, cost-2*Milli*int64(op&3))
			case 3:
				next = Penalize(l, s, at, 500)
			case 4:
				next = Sync(l, s, at, cost)
			}
			if next != s {
				earned += max(Refill(l, s, at).Tokens-s.Tokens, 0)
			}
			if next.Last < s.Last {
				t.Fatalf("Last moved back from %d to %d (caller at %d)", s.Last, next.Last, now)
			}
			s = next
			if bound := mulDiv(seen-start, l.Amount, l.Period); earned > bound {
				t.Fatalf("credited %d millitokens of refill, at most %d earned by %d ms", earned, bound, seen-start)
			}
		}
	})
}
