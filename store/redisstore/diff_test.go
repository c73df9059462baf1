package redisstore

import (
	"context"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
)

// mathLua exposes core.lua's and lib.lua's functions to the differential
// tests. take is bucket.Take composed of them, step for step as acquire.lua
// inlines it.
const mathLua = `
local function sfmt(x) return string.format('%d', x) end
local function take(L, tok, last, u, now, cost)
  local t, l = refill(L, tok, last, u, now)
  if t >= cost and now >= u then
    return t - cost, l, 0, true
  end
  if L.amt <= 0 then
    return tok, last, 0, false
  end
  return tok, last, retryIn(L, tok, last, u, now, cost), false
end
local op = ARGV[1]
local a = {}
for i = 2, #ARGV do a[i - 1] = tonumber(ARGV[i]) end
if op == 'muldiv' then
  local q, r = mulDivRem(a[1], a[2], a[3])
  return { sfmt(q), sfmt(r), sfmt(ceilMulDiv(a[1], a[2], a[3])) }
elseif op == 'prodless' then
  return { prodLess(a[1], a[2], a[3], a[4]) and '1' or '0' }
end
local L = { t = a[1], cap = a[2], amt = a[3], per = a[4], floor = a[5] }
local tok, last, u, now, x = a[6], a[7], a[8], a[9], a[10]
if op == 'refill' then
  local t, l = refill(L, tok, last, u, now)
  return { sfmt(t), sfmt(l) }
elseif op == 'take' then
  local t, l, w, ok = take(L, tok, last, u, now, x)
  return { sfmt(t), sfmt(l), sfmt(w), ok and '1' or '0' }
elseif op == 'retry' then
  return { sfmt(retryIn(L, tok, last, u, now, x)) }
elseif op == 'adjust' then
  local t, l, ap = adjust(L, tok, last, u, a[11] or 0, now, x)
  return { sfmt(t), sfmt(l), sfmt(ap) }
elseif op == 'penalize' then
  local t, l = penalize(L, tok, last, u, now, x)
  return { sfmt(t), sfmt(l) }
elseif op == 'cooldown' then
  local t, l, nu = cooldown(L, tok, last, u, now, x)
  return { sfmt(t), sfmt(l), sfmt(nu) }
elseif op == 'sync' then
  local t, l = sync(L, tok, last, u, now, x)
  return { sfmt(t), sfmt(l) }
elseif op == 'align' then
  local t, l, at = align(L, tok, last, now, x)
  local w = behind(L, last, now, x)
  return { sfmt(t), sfmt(l), sfmt(at), sfmt(w), sfmt(skewRetry(L, tok, last, u, at, w, 1000)) }
end
-- Reservations: a[11] is the state's reserved instant, a[12] a valid
-- instant; reconfigure takes the new limits in a[12..16] and reset in a[17].
local res = a[11]
if op == 'reserve' then
  local t, l, r, ok = reserve(L, tok, last, u, res, now, x, a[12])
  return { sfmt(t), sfmt(l), sfmt(r), ok and '1' or '0' }
elseif op == 'rbound' then
  return { sfmt(reserveBound(L, tok, last, u, now, x)) }
elseif op == 'unreserve' then
  local t, l, back = unreserve(L, tok, last, u, res, now, x, a[12])
  return { sfmt(t), sfmt(l), sfmt(back) }
elseif op == 'debt' then
  return { sfmt(reservedDebt(L, res, now)), sfmt(effectiveFloor(L, res, now)) }
elseif op == 'reconfigure' then
  local N = { t = a[12], cap = a[13], amt = a[14], per = a[15], floor = a[16] }
  local t, l, nu, r = reconfigure(L, N, tok, last, u, res, now, a[17] == 1)
  return { sfmt(t), sfmt(l), sfmt(nu), sfmt(r) }
end
return redis.error_reply('unknown op')
`

var mathScript = redis.NewScript(coreLua + libLua + mathLua)

func evalInts(t *testing.T, c *redis.Client, args ...any) []int64 {
	t.Helper()
	v, err := mathScript.Run(context.Background(), c, nil, args...).StringSlice()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	out := make([]int64, len(v))
	for i, s := range v {
		n, ok := new(big.Int).SetString(s, 10)
		if !ok || !n.IsInt64() {
			t.Fatalf("%v: bad integer %q", args, s)
		}
		out[i] = n.Int64()
	}
	return out
}

// TestLuaMulDiv checks the limb arithmetic against math/big: exact below
// 2^52, saturated above.
func TestLuaMulDiv(t *testing.T) {
	c := newClient(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const two53 = 1 << 53
	cases := [][3]int64{{0, 5, 7}, {two53 - 1, two53 - 1, 1 << 49}, {two53 - 1, 1_000_000_000_000_000, 31_622_400_000},
		{1_000_000_000_000_000, 1000, 1000}, {123456789, 987654321, 1}, {1 << 40, 1 << 12, 3}, {two53 - 1, 1, 1}}
	for range 300 {
		a := rng.Int64N(two53)
		b := rng.Int64N(1 << (rng.IntN(53) + 1))
		cc := rng.Int64N(1<<(rng.IntN(49)+1)) + 1
		cases = append(cases, [3]int64{a, b, cc})
	}
	for _, k := range cases {
		got := evalInts(t, c, "muldiv", k[0], k[1], k[2])
		p := new(big.Int).Mul(big.NewInt(k[0]), big.NewInt(k[1]))
		q, r := new(big.Int).QuoRem(p, big.NewInt(k[2]), new(big.Int))
		if q.Cmp(big.NewInt(1<<52)) >= 0 { // saturated, or exact when the product fits a double
			if got[0] != two53 && (!q.IsInt64() || got[0] != q.Int64()) {
				t.Errorf("muldiv%v = %d, want saturation (%s)", k, got[0], q)
			}
			continue
		}
		ceil := q.Int64()
		if r.Sign() > 0 {
			ceil++
		}
		if got[0] != q.Int64() || got[1] != r.Int64() || got[2] != ceil {
			t.Errorf("muldiv%v = %v, want %s %s %d", k, got, q, r, ceil)
		}
	}
	for range 200 {
		a, b, cc, d := rng.Int64N(two53), rng.Int64N(two53), rng.Int64N(two53), rng.Int64N(two53)
		if rng.IntN(4) == 0 {
			cc, d = b, a // equal products
		}
		want := new(big.Int).Mul(big.NewInt(a), big.NewInt(b)).Cmp(new(big.Int).Mul(big.NewInt(cc), big.NewInt(d))) < 0
		if got := evalInts(t, c, "prodless", a, b, cc, d)[0] == 1; got != want {
			t.Errorf("prodLess(%d,%d,%d,%d) = %v, want %v", a, b, cc, d, got, want)
		}
	}
}

// diffConfigs are extreme and ordinary valid bucket configurations.
func diffConfigs(rng *rand.Rand) []bucket.Config {
	cs := []bucket.Config{
		bucket.PerPeriod(bucket.Requests, 100, time.Minute),
		bucket.PerPeriod(bucket.Tokens, 1_000_000, time.Minute),
		bucket.PerPeriod(bucket.Tokens, bucket.MaxCapacity, time.Millisecond),
		{Type: bucket.Tokens, Capacity: bucket.MaxCapacity, RefillAmount: bucket.MaxCapacity, RefillPeriod: bucket.MaxPeriodMs * time.Millisecond, MaxDebt: bucket.MaxCapacity},
		{Type: bucket.Tokens, Capacity: 7, RefillAmount: 3, RefillPeriod: 1001 * time.Millisecond, MaxDebt: bucket.NoDebt},
		{Type: bucket.Requests, Capacity: 1, RefillAmount: 1, RefillPeriod: bucket.MaxPeriodMs * time.Millisecond},
		{Type: bucket.Tokens, Capacity: bucket.MaxCapacity, RefillAmount: 3171, RefillPeriod: time.Millisecond * 1000},
		bucket.ConcurrentSlots(5),
		bucket.ConcurrentSlots(bucket.MaxCapacity),
	}
	for len(cs) < 60 {
		c := bucket.Config{Type: bucket.LimitType(rng.IntN(2) + 1), Capacity: rng.Int64N(bucket.MaxCapacity) + 1,
			RefillAmount: rng.Int64N(bucket.MaxCapacity) + 1, RefillPeriod: time.Duration(rng.Int64N(bucket.MaxPeriodMs)+1) * time.Millisecond,
			MaxDebt: rng.Int64N(bucket.MaxCapacity+2) - 1}
		if rng.IntN(2) == 0 {
			c.Capacity = rng.Int64N(10_000) + 1
			c.RefillAmount = rng.Int64N(10_000) + 1
			c.RefillPeriod = time.Duration(rng.Int64N(100_000)+1) * time.Millisecond
		}
		if c.Validate() == nil {
			cs = append(cs, c)
		}
	}
	return cs
}

// TestLuaMatchesBucket runs the same random and extreme inputs through
// package bucket and the Lua port on the real server and requires identical
// results.
func TestLuaMatchesBucket(t *testing.T) {
	c := newClient(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, cfg := range diffConfigs(rng) {
		l := cfg.Limits()
		lim := []any{int64(l.Type), l.Capacity, l.Amount, l.Period, l.Floor}
		for range 12 {
			s := bucket.State{Tokens: l.Floor + rng.Int64N(l.Capacity-l.Floor+1), Last: rng.Int64N(bucket.MaxTimeMs)}
			switch rng.IntN(4) {
			case 0:
				s.Tokens = l.Capacity
			case 1:
				s.Tokens = l.Floor
			case 2:
				if l.Amount > 0 { // settlements keep debt below the floor
					s.Tokens = bucket.MinBalance + rng.Int64N(l.Floor-bucket.MinBalance+1)
				}
			}
			now := s.Last + rng.Int64N(1<<uint(rng.IntN(45)+1))
			switch rng.IntN(5) {
			case 0:
				now = s.Last - rng.Int64N(1000) // clock behind
			case 1:
				now = bucket.MaxTimeMs
			}
			now = max(0, min(now, bucket.MaxTimeMs))
			s.Until = diffUntil(rng, s.Last, now)
			cost := (rng.Int64N(cfg.Capacity) + 1) * bucket.Milli
			delta := (rng.Int64N(2*bucket.MaxCapacity+1) - bucket.MaxCapacity) * bucket.Milli
			factor := rng.Int64N(1001)
			base := append(append([]any{}, lim...), s.Tokens, s.Last, s.Until, now)
			args := func(op string, x int64) []any { return append(append([]any{op}, base...), x) }

			r := bucket.Refill(l, s, now)
			if got := evalInts(t, c, args("refill", 0)...); got[0] != r.Tokens || got[1] != r.Last {
				t.Errorf("%+v %+v now %d: refill lua %v, go %+v", l, s, now, got, r)
			}
			ns, w, ok := bucket.Take(l, s, now, cost)
			okI := int64(0)
			if ok {
				okI = 1
			}
			if got := evalInts(t, c, args("take", cost)...); got[0] != ns.Tokens || got[1] != ns.Last || got[2] != w || got[3] != okI {
				t.Errorf("%+v %+v now %d cost %d: take lua %v, go %+v %d %v", l, s, now, cost, got, ns, w, ok)
			}
			if got, want := evalInts(t, c, args("retry", cost)...)[0], bucket.RetryIn(l, s, now, cost); got != want {
				t.Errorf("%+v %+v now %d cost %d: retry lua %d, go %d", l, s, now, cost, got, want)
			}
			as, ap := bucket.Adjust(l, s, now, delta)
			if got := evalInts(t, c, args("adjust", delta)...); got[0] != as.Tokens || got[1] != as.Last || got[2] != ap {
				t.Errorf("%+v %+v now %d delta %d: adjust lua %v, go %+v %d", l, s, now, delta, got, as, ap)
			}
			ps := bucket.Penalize(l, s, now, factor)
			if got := evalInts(t, c, args("penalize", factor)...); got[0] != ps.Tokens || got[1] != ps.Last {
				t.Errorf("%+v %+v now %d factor %d: penalize lua %v, go %+v", l, s, now, factor, got, ps)
			}
			until := min(now+rng.Int64N(2*dayMs)-dayMs/4, bucket.MaxTimeMs) // at or before now: a refill only
			cs := bucket.Cooldown(l, s, now, until)
			if got := evalInts(t, c, args("cooldown", until)...); got[0] != cs.Tokens || got[1] != cs.Last || got[2] != cs.Until {
				t.Errorf("%+v %+v now %d until %d: cooldown lua %v, go %+v", l, s, now, until, got, cs)
			}
			remaining := rng.Int64N(l.Capacity + 1)
			ss := bucket.Sync(l, s, now, remaining)
			if got := evalInts(t, c, args("sync", remaining)...); got[0] != ss.Tokens || got[1] != ss.Last {
				t.Errorf("%+v %+v now %d remaining %d: sync lua %v, go %+v", l, s, now, remaining, got, ss)
			}
			skew := []int64{1, 1000, 3_600_000}[rng.IntN(3)]
			at, wait := bucket.Align(l, s, now, skew)
			sr := bucket.SkewRetry(l, s, at, wait, bucket.Milli)
			if got := evalInts(t, c, args("align", skew)...); got[0] != s.Tokens || got[1] != s.Last || got[2] != at || got[3] != wait || got[4] != sr {
				t.Errorf("%+v %+v now %d skew %d: align lua %v, go %d %d %d", l, s, now, skew, got, at, wait, sr)
			}
		}
	}
}

const dayMs = 24 * 3600 * 1000

// diffUntil returns a random cooldown end for a state last refilled at last
// and read at now: none, long past, between last and now, at either of
// them, or ahead of now by up to a day.
func diffUntil(rng *rand.Rand, last, now int64) int64 {
	var u int64
	switch rng.IntN(8) {
	case 0, 1, 2:
		return 0
	case 3:
		u = min(last, now) - rng.Int64N(dayMs)
	case 4:
		lo, hi := min(last, now), max(last, now)
		u = lo + rng.Int64N(hi-lo+1)
	case 5:
		u = []int64{last, now}[rng.IntN(2)]
	default:
		u = max(last, now) + rng.Int64N(dayMs) + 1
	}
	return max(0, min(u, bucket.MaxTimeMs))
}
