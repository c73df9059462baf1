package redisstore

import (
	"math/rand/v2"
	"testing"

	"github.com/ontopix/sluice/bucket"
)

// TestLuaMatchesReserveMath runs random and extreme inputs through the
// reservation math of package bucket (Reserve, ReserveBound, Unreserve,
// ReservedDebt, EffectiveFloor, and Adjust and Reconfigure with pending
// reservations) and through its Lua port on the real server, and requires
// identical results.
func TestLuaMatchesReserveMath(t *testing.T) {
	c := newClient(t)
	rng := rand.New(rand.NewPCG(5, 6))
	cfgs := diffConfigs(rng)
	for _, cfg := range cfgs {
		l := cfg.Limits()
		lim := []any{int64(l.Type), l.Capacity, l.Amount, l.Period, l.Floor}
		for range 10 {
			s := diffReservedState(rng, l)
			now := s.Last + rng.Int64N(1<<uint(rng.IntN(40)+1))
			if rng.IntN(5) == 0 {
				now = s.Last - rng.Int64N(1000)
			}
			now = max(0, min(now, bucket.MaxTimeMs))
			s.Until = diffUntil(rng, s.Last, now)
			s.Reserved = diffReserved(rng, now)
			cost := (rng.Int64N(cfg.Capacity) + 1) * bucket.Milli
			valid := min(now+bucket.RetryIn(l, s, now, cost)+[]int64{0, 0, 1, rng.Int64N(bucket.MaxReserveMs)}[rng.IntN(4)], bucket.MaxTimeMs)
			base := append(append([]any{}, lim...), s.Tokens, s.Last, s.Until, now)
			args := func(op string, x int64, more ...any) []any {
				return append(append(append([]any{op}, base...), x, s.Reserved), more...)
			}

			rs, ok := bucket.Reserve(l, s, now, cost, valid)
			if got := evalInts(t, c, args("reserve", cost, valid)...); got[0] != rs.Tokens || got[1] != rs.Last ||
				got[2] != rs.Reserved || (got[3] == 1) != ok {
				t.Errorf("%+v %+v now %d cost %d valid %d: reserve lua %v, go %+v %v", l, s, now, cost, valid, got, rs, ok)
			}
			if l.Amount > 0 {
				if got, want := evalInts(t, c, args("rbound", cost)...)[0], bucket.ReserveBound(l, s, now, cost); got != want {
					t.Errorf("%+v %+v now %d cost %d: reserve bound lua %d, go %d", l, s, now, cost, got, want)
				}
			}
			us, back := bucket.Unreserve(l, s, now, cost, valid)
			if got := evalInts(t, c, args("unreserve", cost, valid)...); got[0] != us.Tokens || got[1] != us.Last || got[2] != back {
				t.Errorf("%+v %+v now %d cost %d valid %d: unreserve lua %v, go %+v %d", l, s, now, cost, valid, got, us, back)
			}
			if got := evalInts(t, c, args("debt", 0)...); got[0] != bucket.ReservedDebt(l, s, now) || got[1] != bucket.EffectiveFloor(l, s, now) {
				t.Errorf("%+v %+v now %d: debt and floor lua %v, go %d %d", l, s, now, got,
					bucket.ReservedDebt(l, s, now), bucket.EffectiveFloor(l, s, now))
			}
			delta := (rng.Int64N(2*bucket.MaxCapacity+1) - bucket.MaxCapacity) * bucket.Milli
			as, ap := bucket.Adjust(l, s, now, delta)
			if got := evalInts(t, c, args("adjust", delta)...); got[0] != as.Tokens || got[1] != as.Last || got[2] != ap {
				t.Errorf("%+v %+v now %d delta %d: adjust lua %v, go %+v %d", l, s, now, delta, got, as, ap)
			}
			next := diffNext(rng, cfg, cfgs)
			reset := rng.IntN(3) == 0
			nl := next.Limits()
			rc := bucket.Reconfigure(l, nl, s, now, reset)
			resetI := int64(0)
			if reset {
				resetI = 1
			}
			got := evalInts(t, c, args("reconfigure", 0, int64(nl.Type), nl.Capacity, nl.Amount, nl.Period, nl.Floor, resetI)...)
			if got[0] != rc.Tokens || got[1] != rc.Last || got[2] != rc.Until || got[3] != rc.Reserved {
				t.Errorf("%+v → %+v reset %v %+v now %d: reconfigure lua %v, go %+v", l, nl, reset, s, now, got, rc)
			}
		}
	}
}

// diffReservedState returns a random state of a bucket with limits l whose
// balance may be anywhere from bucket.MinBalance to its capacity, as
// reservations allow.
func diffReservedState(rng *rand.Rand, l bucket.Limits) bucket.State {
	s := bucket.State{Last: rng.Int64N(bucket.MaxTimeMs)}
	switch rng.IntN(5) {
	case 0:
		s.Tokens = l.Capacity
	case 1:
		s.Tokens = l.Floor
	case 2:
		s.Tokens = bucket.MinBalance + rng.Int64N(l.Capacity-bucket.MinBalance+1)
	default:
		s.Tokens = l.Floor + rng.Int64N(l.Capacity-l.Floor+1)
	}
	return s
}

// diffReserved returns a random latest reservation instant for a state read
// at now: none, past, now, or ahead by up to a day or to the end of time.
func diffReserved(rng *rand.Rand, now int64) int64 {
	switch rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return max(0, now-rng.Int64N(dayMs))
	case 2:
		return now
	case 3:
		return bucket.MaxTimeMs
	}
	return min(now+rng.Int64N(dayMs)+1, bucket.MaxTimeMs)
}

// diffNext returns the limits a bucket of cfg may be reconfigured to: the
// same, another random configuration of a compatible type, or cfg with a
// changed floor.
func diffNext(rng *rand.Rand, cfg bucket.Config, cfgs []bucket.Config) bucket.Config {
	switch rng.IntN(3) {
	case 0:
		return cfg
	case 1:
		if cfg.Type != bucket.Concurrent {
			n := cfg
			n.MaxDebt = rng.Int64N(n.Capacity+2) - 1
			if n.Validate() == nil {
				return n
			}
		}
	}
	for {
		n := cfgs[rng.IntN(len(cfgs))]
		if (n.Type == bucket.Concurrent) == (cfg.Type == bucket.Concurrent) {
			return n
		}
	}
}
