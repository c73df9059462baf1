package storetest

import (
	"fmt"
	"maps"
	"slices"

	"github.com/ontopix/sluice/bucket"
)

// fair adds a reservation, a cancellation, a dequeue or a settlement
// above the estimate while reservations wait; r is 0..23.
func (g *gen) fair(all []string, r int) {
	switch {
	case r >= 18:
		g.settleWhileQueued(all)
	case r < 9:
		g.reserve(all)
	case r < 15:
		g.cancel()
	default:
		label := g.oldLabel()
		if g.rng.IntN(3) == 0 {
			label = fmt.Sprintf("L%d", max(g.labels-1, 0))
		}
		g.add(Step{Op: "dequeue", Lease: label, Dimensions: g.subset(all)})
	}
}

// reserve adds a reservation of time-based dimensions (rarely the
// concurrent one, refused), with a maximum wait from none to minutes.
func (g *gen) reserve(all []string) {
	st := Step{Op: "reserve", TTLMs: int64(500 + g.rng.IntN(60_000)), Record: g.rng.IntN(10) < 4,
		MaxWaitMs: pick(g.rng, int64(0), 1000, 10_000, 60_000, 600_000)}
	st.Lease = fmt.Sprintf("L%d", g.labels)
	if g.labels > 0 && g.rng.IntN(10) == 0 { // reuse a lease id
		st.Lease = g.oldLabel()
	} else {
		g.labels++
	}
	rpm, tpm, conc, fast := g.dims()
	dims := []string{rpm, tpm, fast}
	if g.rng.IntN(15) == 0 {
		dims = append(dims, conc)
	}
	_ = all
	for _, d := range g.subset(dims) {
		st.Items = append(st.Items, ItemSpec{d, g.cost(d)})
	}
	g.add(st)
}

// settleWhileQueued charges a live lease on a bucket that has a
// reservation pending (valid later than now) above what it holds, as a
// call whose usage exceeded its estimate, and sometimes queues one more
// reservation behind it: the settlement counter must then move, and the
// reservations already made must see it (store.ItemResult.Charged,
// store.BucketState.Charged).
func (g *gen) settleWhileQueued(all []string) {
	type cand struct {
		label, dim string
		held       int64
	}
	queued := map[string]bool{}
	for _, label := range slices.Sorted(maps.Keys(g.m.leases)) {
		l := g.m.leases[label]
		if l.validAt > g.m.base+g.now && !l.cancelled {
			for _, it := range l.items {
				queued[it.Dimension] = true
			}
		}
	}
	var cs []cand
	for _, label := range slices.Sorted(maps.Keys(g.m.leases)) {
		l := g.m.leases[label]
		for i, it := range l.items {
			if b, ok := g.m.live(l, i); ok && b.b.Type != bucket.Concurrent && queued[it.Dimension] {
				cs = append(cs, cand{label, it.Dimension, it.Cost})
			}
		}
	}
	if len(cs) == 0 {
		g.reserve(all)
		return
	}
	c := pick(g.rng, cs...)
	over := 1 + g.rng.Int64N(max(c.held, 1)) // up to 100 % above the estimate
	g.add(Step{Op: "adjust", Lease: c.label, Dimension: c.dim, Delta: over})
	if g.rng.IntN(2) == 0 {
		g.reserve(all)
	}
	g.add(Step{Op: "peek", Dimensions: []string{c.dim}})
}

// cancel cancels a reservation, usually a pending one, sometimes one in
// use, a lease (refused when recorded) or one never made.
func (g *gen) cancel() {
	var pending, any []string
	for _, label := range slices.Sorted(maps.Keys(g.m.leases)) {
		l := g.m.leases[label]
		any = append(any, label)
		if l.validAt > g.m.base+g.now {
			pending = append(pending, label)
		}
	}
	label := "never"
	switch {
	case len(pending) > 0 && g.rng.IntN(4) > 0:
		label = pick(g.rng, pending...)
	case len(any) > 0:
		label = pick(g.rng, any...)
	}
	g.add(Step{Op: "cancel", Lease: label})
}

// usage is one admitted use of a time-based bucket at its valid instant.
type usage struct {
	at, amount int64
	label      string
}

// usageCheck is the fairness invariant: for each time-based bucket, the
// usage admitted at valid instants (grants at their decision time,
// reservations at their valid instant, minus the reservations cancelled
// before their valid instant; settled charges are usage beyond estimates
// that happened, and only make later grants wait) in any window
// [a, b] is at most the capacity plus what the bucket earns over b−a. The
// record restarts when something may legitimately raise the balance (a
// refund, a reconfiguration, a re-creation; the refill timestamp never
// moves back, which the invariants check).
type usageCheck struct {
	uses map[string][]usage
	inc  map[string]int
	last map[string]int64
}

func newUsageCheck() *usageCheck {
	return &usageCheck{uses: map[string][]usage{}, inc: map[string]int{}, last: map[string]int64{}}
}

func (u *usageCheck) check(m *model, st Step, e Expect) string {
	for _, name := range slices.Sorted(maps.Keys(m.buckets)) {
		b := m.buckets[name]
		if b.b.Type == bucket.Concurrent {
			continue
		}
		if u.inc[name] != b.inc || e.Error == "" && (st.Op == "put_bucket" && st.Bucket != nil && st.Bucket.Name == name ||
			st.Op == "adjust" && st.Dimension == name && e.Applied < 0) {
			u.uses[name], u.inc[name] = nil, b.inc
		}
		u.last[name] = b.st.Last
		u.record(m, b, st, e)
		if what := u.window(name, b.lim); what != "" {
			return what
		}
	}
	return ""
}

// record adds what step st admitted on bucket b, or removes a cancelled
// reservation's use.
func (u *usageCheck) record(m *model, b *mBucket, st Step, e Expect) {
	name := b.b.Name
	if e.Error != "" || m.replayed {
		return
	}
	switch {
	case st.Op == "acquire" && e.Granted:
		for i, it := range e.Items {
			if it.Dimension == name {
				u.uses[name] = append(u.uses[name], usage{m.decided[i], it.Cost * bucket.Milli, st.Lease})
			}
		}
	case st.Op == "reserve" && e.Granted:
		for _, it := range e.Items {
			if it.Dimension == name {
				u.uses[name] = append(u.uses[name], usage{m.base + e.ValidAtMs, it.Cost * bucket.Milli, st.Lease})
			}
		}
	case st.Op == "cancel":
		l := m.leases[st.Lease]
		if l != nil && l.validAt > m.base+st.AtMs {
			u.uses[name] = slices.DeleteFunc(u.uses[name], func(x usage) bool { return x.label == st.Lease && x.at == l.validAt })
		}
	}
}

func (u *usageCheck) window(name string, lim bucket.Limits) string {
	us := slices.Clone(u.uses[name])
	slices.SortFunc(us, func(a, b usage) int { return int(a.at - b.at) })
	for i := range us {
		var sum int64
		for j := i; j < len(us); j++ {
			sum += us[j].amount
			span := us[j].at - us[i].at
			allowed := lim.Capacity + (span*lim.Amount+lim.Period-1)/lim.Period
			if sum > allowed {
				return fmt.Sprintf("%s: %d millitokens used at valid instants in [+%d, +%d], more than capacity + refill = %d",
					name, sum, us[i].at, us[j].at, allowed)
			}
		}
	}
	return ""
}
