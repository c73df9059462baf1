package bucket

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// refundCall is one call of a refund run: granted at g, charged e at the
// grant, using a, settled (refunded) or still pending.
type refundCall struct {
	g, e, a int64
	settled bool
}

// corrected returns the balance at now of a bucket with limits l, full at
// start, charged at each call's grant its usage if it settled and its
// estimate if not: the balance the bucket would hold had it known each
// settled call's usage from its grant. Calls are in order of grant.
func corrected(l Limits, start, now int64, calls []refundCall) int64 {
	s := State{Tokens: l.Capacity, Last: start}
	for _, c := range calls {
		s = Refill(l, s, c.g)
		if c.settled {
			s.Tokens -= c.a
		} else {
			s.Tokens -= c.e
		}
	}
	return Refill(l, s, now).Tokens
}

// refundRule is how a run gives a refund back: it returns the refund for
// a call granted at g of amount millitokens, given the bucket's balance.
type refundRule func(g, amount, balance int64) int64

// refundRun grants and settles random calls on one bucket with at most n
// entries of peaks, refunding by rule, and returns the first step where
// the balance rose above the corrected balance (or, when exact, differs
// from it), or "", and the millitokens refunded in all. Refill is a whole
// number of millitokens per millisecond, so that the corrected balance is
// exact whatever instants it is refilled at. Steps are at least a
// millisecond apart when exact is true, and often at the same instant
// otherwise.
func refundRun(run uint64, n int, exact bool, rule func(p *peaks, capacity int64) refundRule) (string, int64) {
	rng := rand.New(rand.NewPCG(run, 11)) // run numbers the random bucket and its calls
	capacity := (10 + rng.Int64N(990)) * Milli
	perMs := 1 + rng.Int64N(50)
	l := Limits{Type: Tokens, Capacity: capacity, Amount: perMs * 1000, Period: 1000}
	now := int64(1_000_000)
	start := now
	s := State{Tokens: capacity, Last: now}
	var p peaks
	refund := rule(&p, capacity)
	var calls []refundCall
	var refunded int64
	fill := capacity / perMs
	for step := range 400 {
		switch r := rng.IntN(10); {
		case r < 5:
			now += rng.Int64N(fill/20 + 1)
		case r < 6:
			now += rng.Int64N(2 * fill)
		}
		if exact {
			now++ // grants at one instant share an entry: exact only apart
		}
		s = Refill(l, s, now)
		p = notePeak(p, s.Tokens)
		if r := rng.IntN(2); r == 0 {
			e := (1 + rng.Int64N(capacity/Milli/2)) * Milli
			a := rng.Int64N(e + 1)
			if rng.IntN(4) == 0 {
				a = e
			}
			if s.Tokens >= e {
				s.Tokens -= e
				p = grantPeak(p, now, s.Tokens, n)
				calls = append(calls, refundCall{g: now, e: e, a: a})
			}
		} else {
			var pending []int
			for i, c := range calls {
				if !c.settled {
					pending = append(pending, i)
				}
			}
			if len(pending) > 0 {
				j := pending[rng.IntN(len(pending))]
				c := &calls[j]
				r := refund(c.g, c.e-c.a, s.Tokens)
				s.Tokens += r
				refunded += r
				c.settled = true
			}
		}
		want := corrected(l, start, now, calls)
		if s.Tokens > want || (exact && s.Tokens != want) {
			return fmt.Sprintf("step %d at %d ms: balance %d, corrected balance %d (capacity %d, %d/ms, %d calls)",
				step, now-start, s.Tokens, want, capacity, perMs, len(calls)), refunded
		}
	}
	return "", refunded
}

// peakRule refunds by refundPeak.
func peakRule(p *peaks, capacity int64) refundRule {
	return func(g, amount, _ int64) int64 {
		var r int64
		*p, r = refundPeak(*p, g, amount, capacity)
		return r
	}
}

// TestRefundPeakExact checks the refund bound against the definition: with
// unbounded entries and steps apart in time the balance is, after every
// step, the corrected balance (every settled call charged its usage at its
// grant, every pending one its estimate), so no window admits more usage
// than capacity + rate × window and no refund is cut that the cap did not
// take; with fewer entries, or grants at one instant, it is never above it.
func TestRefundPeakExact(t *testing.T) {
	var exact, bounded int64
	for run := range uint64(300) {
		what, all := refundRun(run, 1<<30, true, peakRule)
		if what != "" {
			t.Fatalf("run %d, unbounded: %s", run, what)
		}
		exact += all
		for _, n := range []int{1 << 30, maxPeaks, 2, 1} {
			for _, apart := range []bool{true, false} {
				what, all := refundRun(run, n, apart && n == 1<<30, peakRule)
				if what != "" {
					t.Fatalf("run %d, %d entries: %s", run, n, what)
				}
				if n == maxPeaks && apart {
					bounded += all
				}
			}
		}
	}
	t.Logf("with %d entries, refunds gave back %.1f %% of what the exact bound gives", maxPeaks, 100*float64(bounded)/float64(exact))
}

// TestRefundToCapacityOverAdmits shows that the checker above sees the
// fault it guards against: refunding in full up to the capacity, as
// stores did before, leaves the balance above the corrected one.
func TestRefundToCapacityOverAdmits(t *testing.T) {
	naive := func(_ *peaks, capacity int64) refundRule {
		return func(_, amount, balance int64) int64 { return min(amount, capacity-balance) }
	}
	over := 0
	for run := range uint64(100) {
		if what, _ := refundRun(run, maxPeaks, false, naive); what != "" {
			over++
		}
	}
	if over == 0 {
		t.Fatal("refunds up to the capacity never rose above the corrected balance in 100 runs")
	}
	t.Logf("refunds up to the capacity rose above the corrected balance in %d of 100 runs", over)
}

func TestRefundPeak(t *testing.T) {
	tests := []struct {
		name      string
		p         peaks
		g, amount int64
		want      int64
		wantPeaks peaks
	}{
		{"before every entry", peaks{{10, 500}}, 5, 300, 0, peaks{{10, 500}}},
		{"empty", nil, 5, 300, 0, nil},
		{"room for all", peaks{{0, 900}, {10, 400}}, 12, 300, 300, peaks{{0, 900}, {10, 700}}},
		{"the cap took part", peaks{{0, 900}, {10, 800}}, 12, 300, 200, peaks{{0, 1000}}},
		{"full since", peaks{{0, 1000}}, 12, 300, 0, peaks{{0, 1000}}},
		{"older entries rise", peaks{{0, 600}, {10, 500}, {20, 100}}, 10, 300, 300, peaks{{0, 800}, {20, 400}}},
	}
	for _, tt := range tests {
		gotP, got := refundPeak(tt.p, tt.g, tt.amount, 1000)
		if got != tt.want || !slices.Equal(gotP, tt.wantPeaks) {
			t.Errorf("%s: refundPeak(%v, %d, %d, 1000) = %v, %d; want %v, %d", tt.name, tt.p, tt.g, tt.amount, gotP, got, tt.wantPeaks, tt.want)
		}
	}
}
