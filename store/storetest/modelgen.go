package storetest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// gen builds a random sequence step by step, steering by a shadow model so
// that most steps are meaningful: adjustments name dimensions their lease
// holds, retries repeat a real grant, and so on.
type gen struct {
	rng    *rand.Rand
	v1, v2 string // vendors
	m      *model
	now    int64 // the clock of the step being built: t plus its host's offset
	t      int64 // the true time, which never goes back
	hosts  []int64
	labels int
	steps  []Step
	// resends makes the sequence send some requests twice (see
	// maybeResend).
	resends bool
	// caps lists the optional operations the store implements: add
	// drops a step of another, and dropped reports that it did.
	caps    capabilities
	dropped bool
}

// dims returns the sequence's four buckets: requests and tokens of the
// first vendor, a concurrent and a fast tokens bucket of the second.
func (g *gen) dims() (rpm, tpm, conc, fast string) {
	return g.v1 + "#rpm", g.v1 + "#tpm", g.v2 + "#conc", g.v2 + "#tpm2"
}

func (g *gen) spec(name string) BucketSpec {
	rpm, tpm, conc, _ := g.dims()
	r := g.rng
	switch name {
	case rpm:
		n := int64(2 + r.IntN(10))
		return BucketSpec{Name: name, LimitType: "requests", Capacity: n, RefillAmount: n, RefillPeriodMs: pick(r, int64(1000), 10_000, 60_000)}
	case tpm:
		return BucketSpec{Name: name, LimitType: "tokens", Capacity: 1000, RefillAmount: pick(r, int64(100), 1000), RefillPeriodMs: 60_000,
			MaxDebt: pick(r, int64(0), 0, 500, bucket.NoDebt)}
	case conc:
		return BucketSpec{Name: name, LimitType: "concurrent", Capacity: int64(1 + r.IntN(3))}
	}
	return BucketSpec{Name: name, LimitType: "tokens", Capacity: 10_000, RefillAmount: pick(r, int64(7), 10_000, 1_000_000), RefillPeriodMs: pick(r, int64(1000), 60_000)}
}

func (g *gen) add(st Step) {
	g.dropped = !g.caps.supports(st.Op)
	if g.dropped {
		return // an optional operation the store does not implement
	}
	if g.caps.noQueue {
		st.QueueMs = 0
	}
	st.AtMs = g.now
	g.m.apply(st)
	g.steps = append(g.steps, st)
}

// genBase is the time base of the generator's model: Base, a real instant
// as in the checker's runs. At the Unix epoch a reservation made at the
// base and valid at once would be valid at 0, which the model reads as "no
// reservation".
func genBase() int64 { return Base.UnixMilli() }

func (g *gen) sequence(n int) []Step {
	g.m = newModel(genBase())
	g.hosts = g.clocks()
	rpm, tpm, conc, fast := g.dims()
	for _, d := range []string{rpm, tpm, conc, fast} {
		b := g.spec(d)
		g.add(Step{Op: "put_bucket", Bucket: &b})
	}
	for len(g.steps) < n {
		g.tick()
		g.step()
		g.maybeResend()
	}
	return g.steps
}

// clocks returns the offsets of the sequence's hosts from the true time:
// one on time, one off by up to the maximum skew, one off by a little more
// than it and one off by far more, each ahead or behind.
func (g *gen) clocks() []int64 {
	skew := g.m.skew
	sign := func() int64 { return pick(g.rng, int64(1), -1) }
	return []int64{
		0,
		sign() * g.rng.Int64N(skew+1),
		sign() * (skew + 1 + g.rng.Int64N(2*skew)),
		sign() * (5*skew + g.rng.Int64N(10*skew)),
	}
}

// tick moves the true time, mostly forward, sometimes not at all, rarely
// far forward, and picks the host whose clock the next step reads: mostly
// the ones within the maximum skew of each other, sometimes those beyond
// it.
func (g *gen) tick() {
	r := g.rng.IntN(100)
	switch {
	case r < 55:
		g.t += int64(1 + g.rng.IntN(3000))
	case r < 94:
	default:
		g.t += int64(30_000 + g.rng.IntN(90_000))
	}
	h := 0
	switch r := g.rng.IntN(100); {
	case r < 45:
	case r < 80:
		h = 1
	case r < 93:
		h = 2
	default:
		h = 3
	}
	g.now = max(g.t+g.hosts[h], 0)
}

func (g *gen) step() {
	rpm, tpm, conc, fast := g.dims()
	all := []string{rpm, tpm, conc, fast}
	r := g.rng.IntN(100)
	switch {
	case r < 9:
		g.fair(all, g.rng.IntN(24))
	case r < 36:
		g.acquire(all)
	case r < 45:
		g.add(Step{Op: "release", Lease: g.oldLabel()})
	case r < 58:
		g.adjust()
	case r < 63:
		g.add(Step{Op: "extend", Lease: g.oldLabel(), TTLMs: int64(500 + g.rng.IntN(60_000))})
	case r < 67:
		g.add(Step{Op: "penalize", Dimension: pick(g.rng, rpm, tpm, fast, fast, conc), FactorMilli: int64(g.rng.IntN(1001))})
	case r < 72:
		g.cooldown(all)
	case r < 76:
		g.sync(all)
	case r < 80:
		g.add(Step{Op: "peek", Dimensions: g.subset(all)})
	case r < 87:
		g.add(Step{Op: "reconcile"})
	case r < 95:
		g.reconfigure(all)
	default:
		d := pick(g.rng, all...)
		g.add(Step{Op: "delete_bucket", Name: d})
		b := g.spec(d)
		// A creation is sometimes put-if-absent and empty, as a client
		// re-creates a bucket the store lost, and sometimes raced by a
		// second one, which must change nothing.
		ia := g.rng.IntN(2) == 0
		g.add(Step{Op: "put_bucket", Bucket: &b, IfAbsent: ia, Empty: ia})
		if g.rng.IntN(3) == 0 {
			again := g.spec(d)
			g.add(Step{Op: "put_bucket", Bucket: &again, IfAbsent: true, Empty: true})
		}
	}
}

// cooldownDim picks the dimension of a cooldown or a sync: mostly a
// time-based one, sometimes the concurrent one (refused), rarely one
// that does not exist.
func (g *gen) cooldownDim(all []string) string {
	if g.rng.IntN(12) == 0 {
		return g.v1 + "#missing"
	}
	return pick(g.rng, all...)
}

// cooldown adds a cooldown, usually of a few seconds so that the next
// acquisitions fall inside it, sometimes a long one, and rarely an
// invalid one: in the past, of zero, or over store.MaxCooldown.
func (g *gen) cooldown(all []string) {
	ms := int64(1 + g.rng.IntN(5000))
	switch r := g.rng.IntN(20); {
	case r == 0:
		ms = -int64(1 + g.rng.IntN(5000))
	case r == 1:
		ms = 0
	case r == 2:
		ms = maxCooldownMs + int64(g.rng.IntN(2))
	case r < 5:
		ms = int64(5000 + g.rng.IntN(120_000))
	}
	g.add(Step{Op: "cooldown", Dimension: g.cooldownDim(all), CooldownMs: ms})
}

// sync adds a sync whose remaining is around the bucket's balance: below,
// at, above it, zero, its capacity, and rarely out of range.
func (g *gen) sync(all []string) {
	d := g.cooldownDim(all)
	var bal, capacity int64
	if b := g.m.buckets[d]; b != nil {
		s, at := g.m.aligned(b, g.m.base+g.now)
		bal, capacity = bucket.Available(b.lim, s, at)/bucket.Milli, b.b.Capacity
	}
	rem := max(bal+g.rng.Int64N(7)-3, 0)
	switch r := g.rng.IntN(20); {
	case r == 0:
		rem = -1
	case r == 1:
		rem = bucket.MaxCapacity + 1
	case r < 5:
		rem = 0
	case r < 7:
		rem = capacity
	case r < 10:
		rem = g.rng.Int64N(max(capacity, 1))
	}
	g.add(Step{Op: "sync", Dimension: d, Remaining: rem})
}

// maxCooldownMs is store.MaxCooldown in milliseconds.
const maxCooldownMs = int64(store.MaxCooldown / time.Millisecond)

func (g *gen) subset(all []string) []string {
	var out []string
	for len(out) == 0 {
		for _, d := range all {
			if g.rng.IntN(2) == 0 {
				out = append(out, d)
			}
		}
	}
	g.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// oldLabel returns a label used before (or, rarely, one never used).
func (g *gen) oldLabel() string {
	if g.labels == 0 || g.rng.IntN(20) == 0 {
		return "never"
	}
	return fmt.Sprintf("L%d", g.rng.IntN(g.labels))
}

func (g *gen) acquire(all []string) {
	st := Step{Op: "acquire", TTLMs: int64(500 + g.rng.IntN(60_000)), Record: g.rng.IntN(10) < 3}
	if g.rng.IntN(4) == 0 {
		st.QueueMs = int64(1 + g.rng.IntN(5000))
	}
	st.Lease = fmt.Sprintf("L%d", g.labels)
	if g.labels > 0 && g.rng.IntN(10) < 3 { // reuse a lease id
		st.Lease = g.oldLabel()
		if l := g.m.leases[st.Lease]; l != nil && g.rng.IntN(2) == 0 { // a retry
			for _, it := range l.items {
				st.Items = append(st.Items, ItemSpec{it.Dimension, it.Cost})
			}
			g.rng.Shuffle(len(st.Items), func(i, j int) { st.Items[i], st.Items[j] = st.Items[j], st.Items[i] })
			g.add(st)
			return
		}
	} else {
		g.labels++
	}
	for _, d := range g.subset(all) {
		st.Items = append(st.Items, ItemSpec{d, g.cost(d)})
	}
	if g.rng.IntN(50) == 0 {
		st.Items = append(st.Items, ItemSpec{g.v1 + "#missing", 1})
	}
	g.add(st)
}

// cost returns a random cost for dimension d: usually within capacity,
// sometimes the bucket's default (0), rarely above capacity.
func (g *gen) cost(d string) int64 {
	b := g.m.buckets[d]
	if b == nil {
		return 1
	}
	capacity := b.b.Capacity
	switch r := g.rng.IntN(50); {
	case r == 0:
		return capacity + 1
	case r < 8:
		return 0
	}
	return 1 + g.rng.Int64N(max(1, capacity*2/3))
}

// adjust settles a time-based item of a live lease: a charge (one in five
// of them far above the estimate), a refund within what it holds, or a
// refund beyond it.
func (g *gen) adjust() {
	type cand struct {
		label, dim string
		held       int64
	}
	var cs []cand
	for _, label := range slices.Sorted(maps.Keys(g.m.leases)) {
		l := g.m.leases[label]
		for i, it := range l.items {
			if b, ok := g.m.live(l, i); ok && b.b.Type != bucket.Concurrent {
				cs = append(cs, cand{label, it.Dimension, it.Cost})
			}
		}
	}
	if len(cs) == 0 {
		return
	}
	c := pick(g.rng, cs...)
	var delta int64
	switch r := g.rng.IntN(10); {
	case r < 4:
		delta = 1 + g.rng.Int64N(1500)
	case r < 5:
		// Usage far above the estimate, twice in a row: past the debt
		// floor (at most the capacity), then again from a balance
		// already in debt, which must keep it (Adjust never forgives).
		if b := g.m.buckets[c.dim]; b != nil {
			capacity := b.b.Capacity
			g.add(Step{Op: "adjust", Lease: c.label, Dimension: c.dim, Delta: capacity + g.rng.Int64N(capacity)})
			delta = capacity + g.rng.Int64N(capacity)
		} else {
			delta = 1 + g.rng.Int64N(1500)
		}
	case r < 9 && c.held > 0:
		delta = -(1 + g.rng.Int64N(c.held))
	default:
		delta = -(c.held + 1)
	}
	g.add(Step{Op: "adjust", Lease: c.label, Dimension: c.dim, Delta: delta})
}

// reconfigure changes a bucket's limits, rarely with a reset (never of a
// concurrent bucket, which would break balance + held = capacity by
// design) and rarely to or from concurrent (refused).
func (g *gen) reconfigure(all []string) {
	d := pick(g.rng, all...)
	b := g.spec(d)
	st := Step{Op: "put_bucket", Bucket: &b}
	if g.rng.IntN(10) == 0 {
		if b.LimitType == "concurrent" {
			b = BucketSpec{Name: d, LimitType: "requests", Capacity: 3, RefillAmount: 3, RefillPeriodMs: 1000}
		} else {
			b = BucketSpec{Name: d, LimitType: "concurrent", Capacity: 2}
		}
	}
	if g.m.buckets[d] != nil && g.m.buckets[d].b.Type != bucket.Concurrent {
		st.Reset = g.rng.IntN(5) == 0
	}
	// Sometimes conditional on the configuration read: the current one
	// (applied) or a stale one (a conflict that changes nothing).
	if r := g.rng.IntN(6); r < 2 && g.m.buckets[d] != nil {
		cur := g.m.buckets[d].b
		m := BucketSpec{Name: d, LimitType: cur.Type.String(), Capacity: cur.Capacity, RefillAmount: cur.RefillAmount,
			RefillPeriodMs: cur.RefillPeriod.Milliseconds(), CostPerCall: cur.CostPerCall, MaxDebt: cur.MaxDebt}
		if r == 1 {
			m = g.spec(d)
		}
		st.IfMatch = &m
	}
	g.add(st)
}
