package pgstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// opCase is one call of an operation function in TestOperationsMatchBucket:
// a bucket (and for a two-dimension acquisition a second one, b) with a
// random stored state, the caller's time and maximum skew, and the
// operation's argument.
type opCase struct {
	mathCase
	name  string
	b     *opCase
	skew  int64
	arg   int64         // tokens to adjust, factor, duration in ms, tokens remaining, maximum wait, cost
	valid int64         // a cancelled reservation's valid instant
	next  bucket.Config // put_bucket's new configuration
	reset bool
}

// opKinds are the operations TestOperationsMatchBucket drives.
var opKinds = []string{"acquire", "acquire2", "adjust", "penalize", "cooldown", "sync", "put", "reserve", "reserve2", "cancel"}

// randomOp returns a case of kind k, numbered i.
func randomOp(r *rand.Rand, k string, i int) opCase {
	c := opCase{name: fmt.Sprintf("%s-%d", k, i)}
	for {
		c.mathCase = randomCase(r)
		if c.l.Type != bucket.Concurrent || k == "acquire" || k == "acquire2" || k == "put" {
			break
		}
	}
	c.s.Reserved = randomReserved(r, c.l, c.now)
	// The settlement counter, at its wrap-around among other values.
	const half = bucket.ChargedSpan / 2
	c.s.Charged = pick(r, -half, half-1, -half, -1, 0, 1, half-1)
	c.skew = pick(r, 1, time.Hour.Milliseconds(), 1, 1000, time.Hour.Milliseconds())
	capTok := c.c.Capacity
	switch k {
	case "acquire2", "reserve2":
		b := opCase{name: c.name + "-b", mathCase: randomCase(r)}
		for k == "reserve2" && b.l.Type == bucket.Concurrent {
			b.mathCase = randomCase(r)
		}
		b.now = c.now
		b.s.Until = randomUntil(r, b.l, b.s.Last, c.now)
		b.s.Reserved = randomReserved(r, b.l, c.now)
		c.b = &b
	case "adjust":
		c.arg = pick(r, -capTok, capTok, -capTok, -1, 0, 1, capTok)
	case "penalize":
		c.arg = c.fm
	case "cooldown":
		day := store.MaxCooldown.Milliseconds()
		c.arg = pick(r, -2, day, -1, 0, 1, 2, c.l.Period, day)
	case "sync":
		c.arg = pick(r, 0, capTok, 0, 1, capTok-1, capTok, bucket.MaxCapacity)
	case "put":
		typ := bucket.LimitType(0)
		if c.l.Type == bucket.Concurrent {
			typ = bucket.Concurrent
		}
		for c.next = randomConfig(r, typ); typ == 0 && c.next.Type == bucket.Concurrent; {
			c.next = randomConfig(r, typ)
		}
		c.reset = r.IntN(3) == 0
	}
	if k == "reserve" || k == "reserve2" {
		c.arg = pick(r, 0, bucket.MaxReserveMs, 0, 1, c.l.Period, bucket.MaxReserveMs)
	}
	if k == "cancel" {
		c.arg = pick(r, 0, capTok, 0, 1, capTok)
		c.valid = randomValid(r, c)
	}
	return c
}

// insertBuckets writes the cases' buckets with their stored states as they
// are, straight into the table.
func insertBuckets(t *testing.T, s *Store, cases []*opCase) {
	t.Helper()
	var names []string
	var types []int16
	var caps, amts, pers, debts, toks, lasts, untils, reserveds, chargeds []int64
	for _, c := range cases {
		names, types = append(names, c.name), append(types, int16(c.c.Type))
		caps, amts, pers = append(caps, c.c.Capacity), append(amts, c.c.RefillAmount), append(pers, c.c.RefillPeriod.Milliseconds())
		debts, toks, lasts, untils = append(debts, c.c.MaxDebt), append(toks, c.s.Tokens), append(lasts, c.s.Last), append(untils, c.s.Until)
		reserveds, chargeds = append(reserveds, c.s.Reserved), append(chargeds, c.s.Charged)
	}
	sch := pgx.Identifier{s.Schema()}.Sanitize()
	if _, err := s.pool.Exec(context.Background(), `INSERT INTO `+sch+`.buckets (name, limit_type, capacity, refill_amount,
		refill_period_ms, cost_per_call, max_debt, tokens, last_refill_ms, cooldown_until_ms, reserved_until_ms, charged)
		SELECT n, ty, ca, am, pe, 0, de, tk, la, un, rs, ch FROM unnest($1::text[], $2::smallint[], $3::bigint[], $4::bigint[],
			$5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[]) AS u(n, ty, ca, am, pe, de, tk, la, un, rs, ch)`,
		names, types, caps, amts, pers, debts, toks, lasts, untils, reserveds, chargeds); err != nil {
		t.Fatal(err)
	}
}

// storedStates reads every bucket's stored state.
func storedStates(t *testing.T, s *Store) map[string]bucket.State {
	t.Helper()
	sch := pgx.Identifier{s.Schema()}.Sanitize()
	rows, err := s.pool.Query(context.Background(), `SELECT name, tokens, last_refill_ms, cooldown_until_ms, reserved_until_ms, charged FROM `+sch+`.buckets`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bucket.State{}
	var name string
	var st bucket.State
	if _, err := pgx.ForEachRow(rows, []any{&name, &st.Tokens, &st.Last, &st.Until, &st.Reserved, &st.Charged}, func() error {
		out[name] = st
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOperationsMatchBucket proves every operation function that does
// bucket math (acquire on one and on two dimensions, adjust, penalize,
// cooldown, sync, put_bucket, reserve on one and on two dimensions, cancel)
// equal to package bucket as the memory store composes it (bucket.Align,
// then the operation), on random and extreme stored states with and without
// a cooldown and a latest reservation before, at or after the decision
// time: the same results and the same stored state afterwards, cooldown end
// and latest reservation included. Peek's refill of such states,
// CooldownUntil and ReservedUntil included, is checked too.
func TestOperationsMatchBucket(t *testing.T) {
	s := newStore(t)
	r := rand.New(rand.NewPCG(7, 8))
	const perKind = 300
	byKind := map[string][]*opCase{}
	var all []*opCase
	for _, k := range append(opKinds, "peek") {
		for i := range perKind {
			c := randomOp(r, k, i)
			byKind[k] = append(byKind[k], &c)
			all = append(all, &c)
			if c.b != nil {
				all = append(all, c.b)
			}
		}
	}
	insertBuckets(t, s, all)
	want := map[string]bucket.State{}
	checkAcquire(t, s, append(byKind["acquire"], byKind["acquire2"]...), want)
	for _, k := range []string{"adjust", "penalize", "cooldown", "sync"} {
		checkSingle(t, s, k, byKind[k], want)
	}
	checkPut(t, s, byKind["put"], want)
	checkReserve(t, s, append(byKind["reserve"], byKind["reserve2"]...), want)
	checkCancel(t, s, byKind["cancel"], want)
	got := storedStates(t, s)
	for _, c := range all {
		if w, ok := want[c.name]; ok && got[c.name] != w {
			t.Errorf("%s %+v: stored %+v, Go %+v", c.name, c.mathCase, got[c.name], w)
		}
	}
	checkPeek(t, s, byKind["peek"])
}

// query runs sql, which calls an operation function once per case in
// order, and returns each row's values.
func query(t *testing.T, s *Store, n int, sql string, args ...any) [][]any {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) != n {
		t.Fatalf("%d rows, want %d", len(out), n)
	}
	return out
}

// goAcquire is the memory store's acquisition over the cases' stored
// states at now (poll 1 s, no leases): whether it is granted, the wait, each
// item's remaining balance and wait, and the states to store.
func goAcquire(items []*opCase, now, skew int64) (bool, int64, []int64, []int64, []bucket.State) {
	granted, retry := true, int64(0)
	rem, waits := make([]int64, len(items)), make([]int64, len(items))
	next, aligned, ats := make([]bucket.State, len(items)), make([]bucket.State, len(items)), make([]int64, len(items))
	lates := make([]int64, len(items))
	refused := false
	for i, c := range items {
		ats[i], lates[i] = bucket.Align(c.l, c.s, now, skew)
		refused = refused || lates[i] > 0
	}
	if refused { // a caller too far behind is refused, changing nothing
		for i, c := range items {
			rem[i], next[i] = bucket.Available(c.l, c.s, ats[i]), c.s
			if lates[i] > 0 {
				waits[i] = bucket.SkewRetry(c.l, c.s, ats[i], lates[i], c.cost)
				retry = max(retry, waits[i])
			}
		}
		return false, retry, rem, waits, next
	}
	for i, c := range items {
		aligned[i] = c.s
		st, w, ok := bucket.Take(c.l, aligned[i], ats[i], c.cost)
		next[i], rem[i] = st, st.Tokens
		if ok {
			continue
		}
		granted = false
		if c.l.Type == bucket.Concurrent {
			w = bucket.ConcurrentRetry(now, 0, time.Second.Milliseconds())
		}
		waits[i], retry = w, max(retry, w)
	}
	if !granted {
		for i, c := range items {
			rem[i], next[i] = bucket.Available(c.l, aligned[i], ats[i]), aligned[i]
		}
	}
	return granted, retry, rem, waits, next
}

func checkAcquire(t *testing.T, s *Store, cases []*opCase, want map[string]bucket.State) {
	t.Helper()
	var as, bs []string
	var cas, cbs, nows, skews []int64
	for _, c := range cases {
		b, cb := "", int64(0)
		if c.b != nil {
			b, cb = c.b.name, c.b.cost/bucket.Milli
		}
		as, bs, cas, cbs = append(as, c.name), append(bs, b), append(cas, c.cost/bucket.Milli), append(cbs, cb)
		nows, skews = append(nows, c.now), append(skews, c.skew)
	}
	sch := pgx.Identifier{s.Schema()}.Sanitize()
	rows := query(t, s, len(cases), `SELECT x.o_err, x.o_granted, x.o_now, x.o_retry, x.o_remaining, x.o_waits, x.o_expires
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[])
			WITH ORDINALITY AS u(a, b, ca, cb, now, skew, ord)
		CROSS JOIN LATERAL `+sch+`.acquire(CASE WHEN u.b = '' THEN ARRAY[u.a] ELSE ARRAY[u.a, u.b] END,
			CASE WHEN u.b = '' THEN ARRAY[u.ca] ELSE ARRAY[u.ca, u.cb] END, u.now, 60000, gen_random_uuid(), 't', false, 1000, u.skew) x
		ORDER BY u.ord`, as, bs, cas, cbs, nows, skews)
	for i, c := range cases {
		items := []*opCase{c}
		if c.b != nil {
			items = append(items, c.b)
		}
		granted, retry, rem, waits, next := goAcquire(items, c.now, c.skew)
		var expires any
		if granted {
			expires = c.now + 60000
		}
		for _, it := range items { // a refusal for the caller's clock reports its lag
			if _, late := bucket.Align(it.l, it.s, c.now, c.skew); late > 0 {
				expires = max(deref64(expires), it.s.Last-c.now)
			}
		}
		w := []any{nil, granted, c.now, retry, rem, waits, expires}
		if g := fmt.Sprint(rows[i]); g != fmt.Sprint(w) {
			t.Errorf("acquire %s: SQL %s, Go %s", describe(items), g, fmt.Sprint(w))
		}
		for j, it := range items {
			want[it.name] = next[j]
		}
	}
}

// describe prints cases for a failure message.
func describe(items []*opCase) string {
	out := ""
	for _, c := range items {
		out += fmt.Sprintf("[%s %+v skew %d arg %d]", c.name, c.mathCase, c.skew, c.arg)
	}
	return out
}

// singleCalls are the columns read from, and the calls of, the one-bucket
// operation functions, on u(n, a, now, skew): name, argument, time,
// maximum skew.
var singleCalls = map[string]string{
	"adjust":   "x.o_err, x.o_applied, x.o_remaining FROM %s.adjust(u.n, u.a, u.now, gen_random_uuid(), false, 1000000000000000, NULL, u.skew)",
	"penalize": "x.* FROM %s.penalize(u.n, u.now, u.a, u.skew)",
	"cooldown": "x.* FROM %s.cooldown(u.n, u.now, u.a, u.skew)",
	"sync":     "x.* FROM %s.sync(u.n, u.now, u.a, u.skew)",
}

// goSingle is the memory store's one-bucket operation k on c: its results
// after the error column, and the state to store.
func goSingle(k string, c *opCase) ([]any, bucket.State) {
	st := c.s
	at, _ := bucket.Align(c.l, st, c.now, c.skew)
	before := bucket.Available(c.l, st, at)
	switch k {
	case "adjust":
		ns, applied := bucket.Adjust(c.l, st, at, c.arg*bucket.Milli)
		return []any{applied, ns.Tokens}, ns
	case "penalize":
		ns := bucket.Penalize(c.l, st, at, c.arg)
		return []any{before, ns.Tokens}, ns
	case "cooldown":
		ns := bucket.Cooldown(c.l, st, at, at+c.arg)
		return []any{before, ns.Tokens, ns.Until}, ns
	default:
		ns := bucket.Sync(c.l, st, at, c.arg*bucket.Milli)
		return []any{before, ns.Tokens}, ns
	}
}

func checkSingle(t *testing.T, s *Store, k string, cases []*opCase, want map[string]bucket.State) {
	t.Helper()
	var names []string
	var args, nows, skews []int64
	for _, c := range cases {
		names, args, nows, skews = append(names, c.name), append(args, c.arg), append(nows, c.now), append(skews, c.skew)
	}
	sch := pgx.Identifier{s.Schema()}.Sanitize()
	cols, call, _ := strings.Cut(fmt.Sprintf(singleCalls[k], sch), " FROM ")
	rows := query(t, s, len(cases), `SELECT `+cols+` FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
		WITH ORDINALITY AS u(n, a, now, skew, ord) CROSS JOIN LATERAL `+call+` x ORDER BY u.ord`,
		names, args, nows, skews)
	for i, c := range cases {
		res, ns := goSingle(k, c)
		w := append([]any{nil}, res...)
		if g := fmt.Sprint(rows[i]); g != fmt.Sprint(w) {
			t.Errorf("%s %s: SQL %s, Go %s", k, describe([]*opCase{c}), g, fmt.Sprint(w))
		}
		want[c.name] = ns
	}
}

func checkPut(t *testing.T, s *Store, cases []*opCase, want map[string]bucket.State) {
	t.Helper()
	var names []string
	var types []int16
	var caps, amts, pers, debts, nows, skews []int64
	var resets []bool
	for _, c := range cases {
		n := c.next
		names, types, caps = append(names, c.name), append(types, int16(n.Type)), append(caps, n.Capacity)
		amts, pers, debts = append(amts, n.RefillAmount), append(pers, n.RefillPeriod.Milliseconds()), append(debts, n.MaxDebt)
		nows, skews, resets = append(nows, c.now), append(skews, c.skew), append(resets, c.reset)
	}
	sch := pgx.Identifier{s.Schema()}.Sanitize()
	rows := query(t, s, len(cases), `SELECT `+sch+`.put_bucket(u.n, u.ty, u.ca, u.am, u.pe, 0, u.de, u.now, u.rs, u.skew)
		FROM unnest($1::text[], $2::smallint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[],
			$8::bigint[], $9::boolean[]) WITH ORDINALITY AS u(n, ty, ca, am, pe, de, now, skew, rs, ord)
		ORDER BY u.ord`, names, types, caps, amts, pers, debts, nows, skews, resets)
	for i, c := range cases {
		if rows[i][0] != nil {
			t.Errorf("put %s: refused with %v", describe([]*opCase{c}), rows[i][0])
		}
		st := c.s
		at, _ := bucket.Align(c.l, st, c.now, c.skew)
		want[c.name] = bucket.Reconfigure(c.l, c.next.Limits(), st, at, c.reset)
	}
}

func checkPeek(t *testing.T, s *Store, cases []*opCase) {
	t.Helper()
	skew := s.skewMs()
	for _, c := range cases[:100] {
		got, err := s.Peek(context.Background(), store.PeekRequest{Now: time.UnixMilli(c.now), Dimensions: []string{c.name}})
		if err != nil {
			t.Fatal(err)
		}
		st := c.s
		at, _ := bucket.Align(c.l, st, c.now, skew)
		w := bucket.Refill(c.l, st, at)
		if g := got[0]; g.Tokens != w.Tokens || g.LastRefill != w.Last || g.CooldownUntil != w.Until || g.ReservedUntil != w.Reserved {
			t.Errorf("peek %s: tokens %d, last %d, until %d, reserved %d; Go %+v", describe([]*opCase{c}),
				g.Tokens, g.LastRefill, g.CooldownUntil, g.ReservedUntil, w)
		}
	}
}

// deref64 returns x as an int64, 0 when it is nil.
func deref64(x any) int64 {
	v, _ := x.(int64)
	return v
}
