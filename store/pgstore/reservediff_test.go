package pgstore

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ontopix/sluice/bucket"
)

// randomReserved returns a latest reservation instant for a bucket read at
// now: none, or one before, at or after now, up to bucket.MaxReserveMs
// away. Concurrent buckets are never reserved.
func randomReserved(r *rand.Rand, l bucket.Limits, now int64) int64 {
	if l.Type == bucket.Concurrent || r.IntN(4) == 0 {
		return 0
	}
	d := pick(r, -bucket.MaxReserveMs, bucket.MaxReserveMs, -1, 0, 1, 2, l.Period, l.Period-1, -l.Period, bucket.MaxReserveMs)
	return min(max(now+d, 1), bucket.MaxTimeMs+bucket.MaxReserveMs)
}

// randomValid returns the valid instant of a reservation to cancel on c:
// the bucket's latest one, shortly before it, or any time near c.now.
func randomValid(r *rand.Rand, c opCase) int64 {
	switch r.IntN(3) {
	case 0:
		if c.s.Reserved > 0 {
			return c.s.Reserved
		}
	case 1:
		if c.s.Reserved > 0 {
			return max(c.s.Reserved-pick(r, 0, 2*c.l.Period, 0, 1, c.l.Period), 1)
		}
	}
	return max(c.now+pick(r, -bucket.MaxReserveMs, bucket.MaxReserveMs, -1, 0, 1), 1)
}

// goReserve is the memory store's reservation over the cases' stored
// states at now with no record: whether it is granted, the wait, the valid
// instant (0 on a denial), each item's remaining balance and wait, and the
// states to store.
func goReserve(items []*opCase, now, skew, maxWait int64) (bool, int64, int64, []int64, []int64, []bucket.State) {
	n := len(items)
	states, next, ats := make([]bucket.State, n), make([]bucket.State, n), make([]int64, n)
	rem, waits := make([]int64, n), make([]int64, n)
	valid, tooLong := now, false
	lates := make([]int64, n)
	refused := false
	for i, c := range items {
		ats[i], lates[i] = bucket.Align(c.l, c.s, now, skew)
		refused = refused || lates[i] > 0
	}
	if refused { // a caller too far behind is refused, changing nothing
		for i, c := range items {
			states[i], rem[i] = c.s, bucket.Available(c.l, c.s, ats[i])
			if lates[i] > 0 {
				waits[i] = bucket.SkewRetry(c.l, c.s, ats[i], lates[i], c.cost)
				valid = max(valid, now+waits[i])
			}
		}
		return false, valid - now, 0, rem, waits, states
	}
	for i, c := range items {
		states[i] = c.s
		waits[i] = bucket.RetryIn(c.l, states[i], ats[i], c.cost)
		tooLong = tooLong || waits[i] > maxWait
		valid = max(valid, ats[i]+waits[i])
		rem[i] = bucket.Available(c.l, states[i], ats[i])
	}
	wait := valid - now
	if !tooLong {
		var bound int64
		for i, c := range items {
			var ok bool
			if next[i], ok = bucket.Reserve(c.l, states[i], ats[i], c.cost, valid); !ok {
				bound = max(bound, bucket.ReserveBound(c.l, states[i], ats[i], c.cost))
			}
		}
		if bound > 0 {
			tooLong, wait = true, bound
		}
	}
	if tooLong {
		return false, wait, 0, rem, waits, states
	}
	for i := range items {
		rem[i] = next[i].Tokens
	}
	return true, wait, valid, rem, waits, next
}

func checkReserve(t *testing.T, s *Store, cases []*opCase, want map[string]bucket.State) {
	t.Helper()
	var as, bs []string
	var cas, cbs, nows, skews, waits []int64
	for _, c := range cases {
		b, cb := "", int64(0)
		if c.b != nil {
			b, cb = c.b.name, c.b.cost/bucket.Milli
		}
		as, bs, cas, cbs = append(as, c.name), append(bs, b), append(cas, c.cost/bucket.Milli), append(cbs, cb)
		nows, skews, waits = append(nows, c.now), append(skews, c.skew), append(waits, c.arg)
	}
	sch := pgx.Identifier{s.Schema()}.Sanitize()
	rows := query(t, s, len(cases), `SELECT x.o_err, x.o_granted, x.o_now, x.o_wait, coalesce(x.o_valid, 0), x.o_remaining, x.o_waits
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[])
			WITH ORDINALITY AS u(a, b, ca, cb, now, skew, mw, ord)
		CROSS JOIN LATERAL `+sch+`.reserve(CASE WHEN u.b = '' THEN ARRAY[u.a] ELSE ARRAY[u.a, u.b] END,
			CASE WHEN u.b = '' THEN ARRAY[u.ca] ELSE ARRAY[u.ca, u.cb] END, u.now, 60000, gen_random_uuid(), 't', false, u.mw, u.skew) x
		ORDER BY u.ord`, as, bs, cas, cbs, nows, skews, waits)
	granted := 0
	for i, c := range cases {
		items := []*opCase{c}
		if c.b != nil {
			items = append(items, c.b)
		}
		ok, wait, valid, rem, ws, next := goReserve(items, c.now, c.skew, c.arg)
		if ok {
			granted++
		}
		w := []any{nil, ok, c.now, wait, valid, rem, ws}
		if g := fmt.Sprint(rows[i]); g != fmt.Sprint(w) {
			t.Errorf("reserve %s: SQL %s, Go %s", describe(items), g, fmt.Sprint(w))
		}
		for j, it := range items {
			want[it.name] = next[j]
		}
	}
	if granted == 0 || granted == len(cases) {
		t.Errorf("%d of %d reservations granted: the cases do not cover both outcomes", granted, len(cases))
	}
}

func checkCancel(t *testing.T, s *Store, cases []*opCase, want map[string]bucket.State) {
	t.Helper()
	var names []string
	var costs, valids, nows, skews []int64
	for _, c := range cases {
		names, costs, valids = append(names, c.name), append(costs, c.arg), append(valids, c.valid)
		nows, skews = append(nows, c.now), append(skews, c.skew)
	}
	sch := pgx.Identifier{s.Schema()}.Sanitize()
	rows := query(t, s, len(cases), `SELECT x.* FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[])
			WITH ORDINALITY AS u(n, c, v, now, skew, ord)
		CROSS JOIN LATERAL `+sch+`.cancel(gen_random_uuid(), false, ARRAY[u.n], ARRAY[u.c], u.v, u.now, u.skew) x
		ORDER BY u.ord`, names, costs, valids, nows, skews)
	back := 0
	for i, c := range cases {
		st := c.s
		at, _ := bucket.Align(c.l, st, c.now, c.skew)
		ns, amount := bucket.Unreserve(c.l, st, at, c.arg*bucket.Milli, c.valid)
		dims, amounts := []string{}, []int64{}
		if amount > 0 {
			dims, amounts = append(dims, c.name), append(amounts, amount)
			back++
		}
		w := []any{nil, c.now < c.valid, dims, amounts}
		if g := fmt.Sprint(rows[i]); g != fmt.Sprint(w) {
			t.Errorf("cancel %s valid %d: SQL %s, Go %s", describe([]*opCase{c}), c.valid, g, fmt.Sprint(w))
		}
		want[c.name] = ns
	}
	if back == 0 {
		t.Errorf("no cancellation gave anything back: the cases do not cover it")
	}
}
