package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ontopix/sluice/bucket"
)

// TestModelConfirmedGrantsNeverFindUnpaidDebt drives the reference model
// with callers that wait in line as package sluice's Client does (reserve;
// at the valid instant, when later, read the settlement counter and wait
// out what grew since, until nothing did), settling from their estimates to
// twice them, while a vendor's reports lower the balance now and then
// (Sync, Penalize, Cooldown). A grant proceeds only when its last
// reading shows no unpaid debt, and then, over every window that ends with
// it, the bucket has admitted at most its capacity plus the window's
// refill, counting each settlement's change to the balance when it was
// made (the counter's change).
func TestModelConfirmedGrantsNeverFindUnpaidDebt(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			if what := confirmRun(seed); what != "" {
				t.Fatal(what)
			}
		})
	}
}

// confirmWaiter is one simulated caller.
type confirmWaiter struct {
	next, validAt  int64
	step           int // 0 reserve, 1 confirm, 2 settle
	label          string
	cost, recorded int64
}

func confirmRun(seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 99))
	const dim = "c#tpm"
	const capacity, runMs = 5_000, 3_000
	m := newModel(Base.UnixMilli())
	m.prefix = fmt.Sprintf("confirm%d/", seed)
	m.apply(Step{Op: "put_bucket", Bucket: &BucketSpec{Name: dim, LimitType: "tokens", Capacity: capacity,
		RefillAmount: capacity, RefillPeriodMs: 1000}})
	b := m.buckets[dim]
	ws := make([]*confirmWaiter, 4+rng.IntN(40))
	for i := range ws {
		ws[i] = &confirmWaiter{next: int64(rng.IntN(200))}
	}
	vendorAt := int64(100 + rng.IntN(400))
	var uses []sqUse
	var seq, labels int64
	settle := func(at int64, st Step) Expect {
		before := b.st.Charged
		e := m.apply(st)
		if d := bucket.ChargedSince(before, b.st.Charged); d != 0 {
			seq++
			uses = append(uses, sqUse{at: at, seq: seq, milli: d})
		}
		return e
	}
	for {
		w := slices.MinFunc(ws, func(a, b *confirmWaiter) int { return int(a.next - b.next) })
		if vendorAt < w.next {
			settle(vendorAt, vendorReport(rng, dim, capacity, vendorAt))
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
			e := m.apply(Step{AtMs: now, Op: "reserve", Lease: w.label, Items: []ItemSpec{{dim, w.cost}},
				TTLMs: 600_000, MaxWaitMs: 600_000})
			if !e.Granted {
				w.next = now + max(e.WaitMs, 1)
				continue
			}
			if e.Items[0].Charged == nil {
				return fmt.Sprintf("+%dms: a granted reservation reports no settlement counter", now)
			}
			w.recorded, w.validAt = *e.Items[0].Charged, e.ValidAtMs
			if w.validAt > now {
				w.step, w.next = 1, w.validAt
				continue
			}
		case 1:
			e := m.apply(Step{AtMs: now, Op: "peek", Dimensions: []string{dim}})
			current := *e.Buckets[0].Charged
			extra := bucket.ChargedSince(w.recorded, current)
			w.recorded = current
			if d := bucket.ChargeDelay(b.lim, extra); d > 0 {
				w.next = now + d
				continue
			}
		}
		if w.step != 2 {
			seq++
			uses = append(uses, sqUse{at: now, seq: seq, milli: w.cost * bucket.Milli, grant: true})
			w.step, w.next = 2, now+int64(1+rng.IntN(100))
			continue
		}
		// From the estimate to twice it. Refunds are left out: with a
		// refund between two confirmations of different waiters, a
		// reservation made later can proceed before one made earlier,
		// and the earlier one's confirmation then counts the later one's
		// cost as not yet used (see docs/architecture.md, "Waiting in
		// line").
		actual := w.cost + rng.Int64N(w.cost+1)
		settle(now, Step{AtMs: now, Op: "adjust", Lease: w.label, Dimension: dim, Delta: actual - w.cost})
		w.step, w.next = 0, now+int64(rng.IntN(20))
	}
	if x := sqExcess(uses, capacity*bucket.Milli, capacity); x > 0 {
		return fmt.Sprintf("a window ending with a grant admitted %d millitokens more than capacity + refill (%d waiters)", x, len(ws))
	}
	return ""
}

// vendorReport returns what a vendor's response at at does to a bucket
// of capacity tokens, chosen at random: a sync to a lower remaining, a
// penalty, or a short cooldown.
func vendorReport(rng *rand.Rand, dim string, capacity, at int64) Step {
	switch rng.IntN(3) {
	case 0:
		return Step{AtMs: at, Op: "sync", Dimension: dim, Remaining: rng.Int64N(capacity)}
	case 1:
		return Step{AtMs: at, Op: "penalize", Dimension: dim, FactorMilli: 500 + rng.Int64N(501)}
	default:
		return Step{AtMs: at, Op: "cooldown", Dimension: dim, CooldownMs: 10 + rng.Int64N(200)}
	}
}
