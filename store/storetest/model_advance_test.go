package storetest

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ontopix/sluice/bucket"
)

// TestModelMovedGrantsNeverOverAdmit drives the reference model with
// callers that wait in line as package sluice's Client does since
// settlements move reservations both ways: reserve; every look interval
// and at the valid instant, read the bucket and move the instant by the
// net change settlements made since the reservation (debt later, rounded
// up; refunds earlier, rounded down), or proceed at once when the balance
// pays every reservation. Calls use from their estimate to twice it, and
// a vendor's reports lower the balance now and then. Over every window
// that ends with a grant, the bucket admits at most its capacity plus the
// window's refill, counting a grant at the instant its caller proceeds
// and usage above the estimate when it is settled. The looks are 50 ms,
// 200 ms and 1 s apart on a bucket earning 5 000 tokens a second.
func TestModelMovedGrantsNeverOverAdmit(t *testing.T) {
	for _, look := range []int64{50, 200, 1000} {
		for seed := range uint64(100) {
			t.Run(fmt.Sprintf("look %d ms/%d", look, seed), func(t *testing.T) {
				if r := advanceRun(advanceCase{seed: seed, look: look, debtOnly: true}); r.excess > 0 {
					t.Fatalf("a window ending with a grant admitted %d millitokens more than capacity + refill (%d moves earlier)", r.excess, r.moved)
				}
			})
		}
	}
}

// TestModelRefundOvershoot measures what refunds do to the bound. With
// calls using from a tenth of their estimate to twice it, a few runs
// admit more than capacity + refill in a short window whichever way
// waiters treat refunds: a refund returns, later, tokens that the
// bucket's capacity would have capped had the estimate been exact (see
// docs/architecture.md, "Refunds"). Moving reservations earlier must not
// make that worse than confirming only at the valid instant, the former
// rule: over the same 400 runs, no more runs over and no larger worst
// excess, counting a grant at its usage (up to the estimate) when it
// proceeds.
func TestModelRefundOvershoot(t *testing.T) {
	type tally struct{ over, worst int64 }
	run := func(c advanceCase) tally {
		var r tally
		for seed := range uint64(400) {
			c.seed = seed
			if x := advanceRun(c).excess; x > 0 {
				r.over, r.worst = r.over+1, max(r.worst, x)
			}
		}
		return r
	}
	former := run(advanceCase{former: true})
	t.Logf("confirming at the valid instant only: %d runs of 400 over, worst %d tokens", former.over, former.worst/bucket.Milli)
	for _, look := range []int64{50, 200, 1000} {
		got := run(advanceCase{look: look})
		t.Logf("moving reservations, looks %d ms apart: %d runs of 400 over, worst %d tokens", look, got.over, got.worst/bucket.Milli)
		if got.over > former.over || got.worst > former.worst {
			t.Errorf("looks %d ms apart: %d runs over, worst %d millitokens; confirming at the valid instant: %d, %d", look, got.over, got.worst, former.over, former.worst)
		}
	}
}

// advanceCase is one simulation's settings.
type advanceCase struct {
	seed     uint64
	look     int64 // ms between looks
	debtOnly bool  // calls use from their estimate to twice it, else from a tenth
	former   bool  // confirm at the valid instant only, never moving earlier
}

// advanceResult is a simulation's outcome.
type advanceResult struct {
	excess int64 // the largest excess over a window ending with a grant, millitokens
	moved  int64 // moves of a reservation earlier
}

// advanceWaiter is one simulated caller.
type advanceWaiter struct {
	next, validAt, at int64 // at: the instant as moved so far
	step              int   // 0 reserve, 1 look, 2 settle
	label             string
	cost, actual      int64
	recorded          int64
}

// moveMs is how far a net change of net millitokens moves a reservation
// on a bucket with limits l, as package sluice computes it.
func moveMs(l bucket.Limits, net int64) int64 {
	if net >= 0 {
		return bucket.ChargeDelay(l, net)
	}
	hi, lo := bits.Mul64(uint64(-net), uint64(l.Period))
	q, _ := bits.Div64(hi, lo, uint64(l.Amount))
	return -int64(q)
}

func advanceRun(c advanceCase) advanceResult {
	rng := rand.New(rand.NewPCG(c.seed, 7))
	const dim = "a#tpm"
	const capacity, runMs = 5_000, 3_000
	m := newModel(Base.UnixMilli())
	m.prefix = fmt.Sprintf("advance%d/", c.seed)
	m.apply(Step{Op: "put_bucket", Bucket: &BucketSpec{Name: dim, LimitType: "tokens", Capacity: capacity,
		RefillAmount: capacity, RefillPeriodMs: 1000}})
	b := m.buckets[dim]
	ws := make([]*advanceWaiter, 4+rng.IntN(40))
	for i := range ws {
		ws[i] = &advanceWaiter{next: int64(rng.IntN(200))}
	}
	vendorAt := int64(100 + rng.IntN(400))
	var uses []sqUse
	var seq, labels, moved int64
	charge := func(at int64, st Step) {
		before := b.st.Charged
		m.apply(st)
		if d := bucket.ChargedSince(before, b.st.Charged); d > 0 {
			seq++
			uses = append(uses, sqUse{at: at, seq: seq, milli: d})
		}
	}
	for {
		w := slices.MinFunc(ws, func(a, b *advanceWaiter) int { return int(a.next - b.next) })
		if vendorAt < w.next {
			charge(vendorAt, vendorReport(rng, dim, capacity, vendorAt))
			vendorAt += int64(100 + rng.IntN(400))
			continue
		}
		now := w.next
		if now >= runMs {
			break
		}
		switch w.step {
		case 0:
			labels++
			w.label, w.cost = fmt.Sprintf("L%d", labels), 50+rng.Int64N(1000)
			w.actual = max(w.cost/10+rng.Int64N(2*w.cost-w.cost/10+1), 1)
			if c.debtOnly {
				w.actual = w.cost + rng.Int64N(w.cost+1)
			}
			e := m.apply(Step{AtMs: now, Op: "reserve", Lease: w.label, Items: []ItemSpec{{dim, w.cost}},
				TTLMs: 600_000, MaxWaitMs: 600_000})
			if !e.Granted {
				w.next = now + max(e.WaitMs, 1)
				continue
			}
			w.recorded, w.validAt, w.at = *e.Items[0].Charged, e.ValidAtMs, e.ValidAtMs
			if w.validAt > now {
				w.step, w.next = 1, min(w.at, now+c.look)
				if c.former {
					w.next = w.at
				}
				continue
			}
		case 1:
			e := m.apply(Step{AtMs: now, Op: "peek", Dimensions: []string{dim}})
			s := e.Buckets[0]
			if c.former {
				extra := bucket.ChargedSince(w.recorded, *s.Charged)
				w.recorded = *s.Charged
				if d := bucket.ChargeDelay(b.lim, extra); d > 0 {
					w.next = now + d
					continue
				}
				break
			}
			at := w.validAt + moveMs(b.lim, bucket.ChargedSince(w.recorded, *s.Charged))
			if s.Tokens >= 0 && s.LastRefillMs <= now && (s.CooldownUntilMs == nil || *s.CooldownUntilMs <= now) {
				at = now // paid
			}
			if at < w.at {
				moved++
			}
			w.at = at
			if at > now {
				w.next = min(at, now+c.look)
				continue
			}
		}
		if w.step != 2 {
			seq++
			uses = append(uses, sqUse{at: now, seq: seq, milli: min(w.actual, w.cost) * bucket.Milli, grant: true})
			w.step, w.next = 2, now+int64(1+rng.IntN(100))
			continue
		}
		if d := w.actual - w.cost; d > 0 {
			charge(now, Step{AtMs: now, Op: "adjust", Lease: w.label, Dimension: dim, Delta: d})
		} else if d < 0 {
			m.apply(Step{AtMs: now, Op: "adjust", Lease: w.label, Dimension: dim, Delta: d}) // counted in the grant
		}
		w.step, w.next = 0, now+int64(rng.IntN(20))
	}
	return advanceResult{excess: max(sqExcess(uses, capacity*bucket.Milli, capacity), 0), moved: moved}
}
