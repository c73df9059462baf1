package pgstore

import (
	"context"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// mathCase is one input of the differential test.
type mathCase struct {
	c             bucket.Config
	l             bucket.Limits
	s             bucket.State
	now, cost, fm int64
}

// pick returns one of the extremes or a random value in [lo, hi].
func pick(r *rand.Rand, lo, hi int64, extremes ...int64) int64 {
	if len(extremes) > 0 && r.IntN(3) == 0 {
		v := extremes[r.IntN(len(extremes))]
		return min(max(v, lo), hi)
	}
	if r.IntN(2) == 0 { // log-uniform, to reach small and large magnitudes
		span := uint64(hi - lo)
		bitsN := r.IntN(64) + 1
		v := r.Uint64() >> (64 - bitsN)
		if span+1 != 0 { // span+1 wraps to 0 only for the whole uint64 range
			v %= span + 1
		}
		return lo + int64(v)
	}
	return lo + r.Int64N(hi-lo+1)
}

// randomConfig returns a valid configuration of type typ, or of a random
// type when typ is 0.
func randomConfig(r *rand.Rand, typ bucket.LimitType) bucket.Config {
	for {
		c := bucket.Config{Type: typ}
		if typ == 0 {
			c.Type = bucket.LimitType(r.IntN(3) + 1)
		}
		c.Capacity = pick(r, 1, bucket.MaxCapacity, 1, 2, 1000, bucket.MaxCapacity)
		c.MaxDebt = pick(r, bucket.NoDebt, bucket.MaxCapacity, bucket.NoDebt, 0, bucket.MaxCapacity)
		if c.Type != bucket.Concurrent {
			c.RefillAmount = pick(r, 1, bucket.MaxCapacity, 1, 7, bucket.MaxCapacity)
			c.RefillPeriod = time.Duration(pick(r, 1, bucket.MaxPeriodMs, 1, 1000, 60000, 3, bucket.MaxPeriodMs)) * time.Millisecond
		}
		if c.Validate() == nil {
			return c
		}
	}
}

func randomCase(r *rand.Rand) mathCase {
	c := randomConfig(r, 0)
	l := c.Limits()
	low := l.Floor // settlements keep debt: a time-based balance reaches MinBalance
	if l.Amount > 0 {
		low = bucket.MinBalance
	}
	tok := pick(r, low, l.Capacity, l.Floor, 0, l.Capacity, l.Capacity-1, -1, l.Floor-1, 2*l.Floor, low)
	last := pick(r, 0, bucket.MaxTimeMs, 0, bucket.MaxTimeMs, 1_700_000_000_000)
	var now int64
	switch r.IntN(4) {
	case 0:
		now = pick(r, 0, bucket.MaxTimeMs, 0, bucket.MaxTimeMs, last, last+1, last-1)
	default:
		now = min(last+pick(r, 0, bucket.MaxFillMs, 1, l.Period, l.Period-1, l.Period+1), bucket.MaxTimeMs)
	}
	cost := pick(r, 1, c.Capacity, 1, c.Capacity) * bucket.Milli
	st := bucket.State{Tokens: tok, Last: last, Until: randomUntil(r, l, last, now)}
	return mathCase{c: c, l: l, s: st, now: now, cost: cost, fm: pick(r, 0, 1000, 0, 1, 800, 999, 1000)}
}

// randomUntil returns a cooldown end for a bucket last written at last and
// read at now: none, or one before, at or after either of them, up to
// store.MaxCooldown away. Concurrent buckets never have one.
func randomUntil(r *rand.Rand, l bucket.Limits, last, now int64) int64 {
	if l.Type == bucket.Concurrent || r.IntN(4) == 0 {
		return 0
	}
	day := store.MaxCooldown.Milliseconds()
	base := now
	if r.IntN(2) == 0 {
		base = last
	}
	d := pick(r, -day, day, -1, 0, 1, 2, l.Period, l.Period-1, -l.Period, day)
	return min(max(base+d, 1), bucket.MaxTimeMs+day)
}

// TestMathMatchesBucket proves the SQL port of the bucket math equal to
// package bucket (Refill, RetryIn, Take, Penalize, Adjust's clamp, Align)
// on random and extreme inputs, evaluated by the real server, with and
// without a cooldown end before, at or after the refill timestamp and the
// decision time. Align is also checked at a time up to two hours behind the
// bucket's last write. The version-2 helpers without a cooldown argument,
// kept for calls running during an upgrade, are checked against the same
// math with no cooldown.
func TestMathMatchesBucket(t *testing.T) {
	s := newStore(t)
	r := rand.New(rand.NewPCG(1, 2))
	const n = 4000
	cases := make([]mathCase, n)
	var caps, amts, pers, toks, lasts, untils, nows, costs, fms, skews, behinds []int64
	rs := rand.New(rand.NewPCG(5, 6))
	for i := range cases {
		c := randomCase(r)
		cases[i] = c
		caps, amts, pers = append(caps, c.l.Capacity), append(amts, c.l.Amount), append(pers, c.l.Period)
		toks, lasts, untils, nows = append(toks, c.s.Tokens), append(lasts, c.s.Last), append(untils, c.s.Until), append(nows, c.now)
		costs, fms = append(costs, c.cost), append(fms, c.fm)
		skews = append(skews, pick(rs, 1, time.Hour.Milliseconds(), 1, 1000, time.Hour.Milliseconds()))
		behinds = append(behinds, max(0, c.s.Last-pick(rs, 0, 2*time.Hour.Milliseconds(), 0, 1, 1000, 1001)))
	}
	sch := pgx.Identifier{s.Schema()}.Sanitize()
	rows, err := s.pool.Query(context.Background(), `
		SELECT r, `+sch+`.retry_in(cap, amt, per, tok, last, until, now, cost),
		       CASE WHEN r[1] > 0 THEN r[1] * fm / 1000 ELSE r[1] END,
		       `+sch+`.align(amt, last, now, skew), `+sch+`.align(amt, last, behind, skew),
		       `+sch+`.refill(cap, amt, per, tok, last, now), `+sch+`.retry_in(cap, amt, per, tok, last, now, cost)
		FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[],
		            $9::bigint[], $10::bigint[], $11::bigint[])
		     WITH ORDINALITY AS u(cap, amt, per, tok, last, until, now, cost, fm, skew, behind, ord),
		     LATERAL (SELECT `+sch+`.refill(cap, amt, per, tok, last, until, now) AS r) x
		ORDER BY ord`, caps, amts, pers, toks, lasts, untils, nows, costs, fms, skews, behinds)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var refilled, aligned, alignedBehind, refilled2 []int64
		var retry, penalized, retry2 int64
		if err := rows.Scan(&refilled, &retry, &penalized, &aligned, &alignedBehind, &refilled2, &retry2); err != nil {
			t.Fatal(err)
		}
		c := cases[i]
		want := bucket.Refill(c.l, c.s, c.now)
		if refilled[0] != want.Tokens || refilled[1] != want.Last {
			t.Errorf("case %d %+v: SQL refill = %v, Go = %+v", i, c, refilled, want)
		}
		if w := bucket.RetryIn(c.l, c.s, c.now, c.cost); retry != w {
			t.Errorf("case %d %+v: SQL retry_in = %d, Go = %d", i, c, retry, w)
		}
		if w := bucket.Penalize(c.l, c.s, c.now, c.fm); penalized != w.Tokens {
			t.Errorf("case %d %+v: SQL penalize = %d, Go = %d", i, c, penalized, w.Tokens)
		}
		for _, a := range []struct {
			now int64
			got []int64
		}{{c.now, aligned}, {behinds[i], alignedBehind}} {
			wat, _ := bucket.Align(c.l, c.s, a.now, skews[i])
			if a.got[0] != c.s.Last || a.got[1] != wat {
				t.Errorf("case %d %+v at %d, skew %d: SQL align = %v, Go = %d, at %d", i, c, a.now, skews[i], a.got, c.s.Last, wat)
			}
		}
		plain := c.s
		plain.Until = 0
		if w := bucket.Refill(c.l, plain, c.now); refilled2[0] != w.Tokens || refilled2[1] != w.Last {
			t.Errorf("case %d %+v: SQL version-2 refill = %v, Go without cooldown = %+v", i, c, refilled2, w)
		}
		if w := bucket.RetryIn(c.l, plain, c.now, c.cost); retry2 != w {
			t.Errorf("case %d %+v: SQL version-2 retry_in = %d, Go without cooldown = %d", i, c, retry2, w)
		}
		i++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if i != n {
		t.Fatalf("got %d rows, want %d", i, n)
	}
}

// TestMulDivExact checks the SQL 128-bit helpers against math/big at the
// extremes, including saturation.
func TestMulDivExact(t *testing.T) {
	s := newStore(t)
	sch := pgx.Identifier{s.Schema()}.Sanitize()
	const maxI = 1<<63 - 1
	vals := []int64{0, 1, 2, 3, 999, 1000, bucket.MaxPeriodMs, bucket.MaxFillMs, bucket.MaxTimeMs, bucket.MaxCapacity * bucket.Milli, 1 << 62, maxI}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		vals = append(vals, r.Int64N(maxI))
	}
	var as, bs, cs []int64
	for range 3000 {
		as = append(as, vals[r.IntN(len(vals))])
		bs = append(bs, vals[r.IntN(len(vals))])
		cs = append(cs, max(1, vals[r.IntN(len(vals))]))
	}
	rows, err := s.pool.Query(context.Background(), `SELECT `+sch+`.mul_div(a, b, c), `+sch+`.ceil_mul_div(a, b, c), `+sch+`.prod_less(a, b, c, a)
		FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS u(a, b, c, o) ORDER BY o`, as, bs, cs)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	maxB := big.NewInt(maxI)
	for i := 0; rows.Next(); i++ {
		var fl, ce int64
		var less bool
		if err := rows.Scan(&fl, &ce, &less); err != nil {
			t.Fatal(err)
		}
		p := new(big.Int).Mul(big.NewInt(as[i]), big.NewInt(bs[i]))
		q, m := new(big.Int).QuoRem(p, big.NewInt(cs[i]), new(big.Int))
		wantF := new(big.Int).Set(q)
		if m.Sign() != 0 {
			q.Add(q, big.NewInt(1))
		}
		if wantF.Cmp(maxB) > 0 {
			wantF.Set(maxB)
		}
		if q.Cmp(maxB) > 0 {
			q.Set(maxB)
		}
		if fl != wantF.Int64() || ce != q.Int64() {
			t.Errorf("a=%d b=%d c=%d: SQL floor/ceil = %d/%d, want %d/%d", as[i], bs[i], cs[i], fl, ce, wantF, q)
		}
		wantLess := p.Cmp(new(big.Int).Mul(big.NewInt(cs[i]), big.NewInt(as[i]))) < 0
		if less != wantLess {
			t.Errorf("prod_less(%d,%d,%d,%d) = %v, want %v", as[i], bs[i], cs[i], as[i], less, wantLess)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}
