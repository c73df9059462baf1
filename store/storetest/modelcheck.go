package storetest

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// Flags of the model-based test; go test passes them after -args, e.g.
//
//	go test ./store/memstore -run TestConformance/Model -args -sluice.sequences=100000
var (
	flagSequences = flag.Int("sluice.sequences", 0, "model-based test: random sequences per store (0: the harness's default)")
	flagSeed      = flag.Uint64("sluice.seed", 0, "model-based test: run only this seed")
)

// DefaultModelSequences is how many random sequences the model-based test
// runs on a store whose Harness leaves ModelSequences zero.
const DefaultModelSequences = 300

// modelSteps is the length of one random sequence.
const modelSteps = 40

// sequences returns how many sequences to run: the flag, else the
// SLUICE_MODEL_SEQUENCES environment variable, else the harness's number.
func (h Harness) sequences() int {
	if *flagSequences > 0 {
		return *flagSequences
	}
	if n, err := strconv.Atoi(os.Getenv("SLUICE_MODEL_SEQUENCES")); err == nil && n > 0 {
		return n
	}
	if h.ModelSequences > 0 {
		return h.ModelSequences
	}
	return DefaultModelSequences
}

// testModel is the model-based test: seeded random sequences of every
// operation at random times (mostly forward, sometimes equal, sometimes
// backwards) run against the store and the reference model side by side.
// Every result and the full state (ListBuckets and Leases) must match after
// every step, and invariants are checked after every step. A failure
// prints the seed and a shrunk sequence that still fails.
func testModel(t *testing.T, h Harness) {
	s := contract.Checked(h.NewStore(t))
	n := h.sequences()
	runs := make([]uint64, 0, n)
	if *flagSeed != 0 {
		runs = append(runs, *flagSeed)
	} else {
		for i := range n {
			runs = append(runs, uint64(i+1))
		}
	}
	mc := &modelChecker{h: h, s: s}
	for _, seed := range runs {
		steps := mc.generate(seed)
		f := mc.check(seed, steps)
		if f == nil {
			continue
		}
		min := mc.shrink(seed, steps[:f.step+1])
		t.Fatalf("model-based test failed (seed %d; rerun with -args -sluice.seed=%d):\n%s\nshrunk to %d steps:\n%s",
			seed, seed, f, len(min.steps), min)
	}
	t.Logf("%d random sequences of %d steps matched the model", len(runs), modelSteps)
}

// modelChecker runs sequences on one store. Each sequence uses its own
// vendor and time base, and is cleaned up (every lease reconciled, every
// bucket deleted) before the next, so the store's whole state is the
// sequence's.
type modelChecker struct {
	h    Harness
	s    store.Store
	runs int
}

// modelFailure describes the first step where store and model disagree.
type modelFailure struct {
	step  int
	steps []Step
	what  string
}

func (f *modelFailure) String() string {
	var b strings.Builder
	for i, st := range f.steps {
		st.Expect = Expect{} // the model's expectations are in the failure
		fmt.Fprintf(&b, "  %2d %s\n", i, strings.TrimSuffix(jsonString(st), `,"expect":{}}`)+"}")
	}
	fmt.Fprintf(&b, "  at step %d: %s", f.step, f.what)
	return b.String()
}

// check runs steps on a clean store and the model; it returns the first
// disagreement, or nil.
func (mc *modelChecker) check(seed uint64, steps []Step) *modelFailure {
	mc.runs++
	baseMs := Base.UnixMilli() + int64(mc.runs)*int64(48*time.Hour/time.Millisecond)
	m := newModel(baseMs)
	m.always = mc.h.AlwaysRecords
	r := newRunner(mc.s, baseMs, fmt.Sprintf("model/%d/%d/", seed, mc.runs))
	m.prefix = r.prefix
	inv := newInvariants()
	fair := newUsageCheck()
	defer mc.cleanup(r, steps)
	for i, st := range steps {
		want := m.apply(st)
		got, err := r.exec(st)
		if err != nil {
			return &modelFailure{i, steps, err.Error()}
		}
		if !sameExpect(got, want) {
			return &modelFailure{i, steps, fmt.Sprintf("result\n   got  %s\n   want %s", jsonString(got), jsonString(want))}
		}
		if what := mc.sameState(r, m, st.AtMs); what != "" {
			return &modelFailure{i, steps, what}
		}
		if st.Resend {
			continue // changed nothing: the invariants saw the first send
		}
		if what := inv.check(m, st, want); what != "" {
			return &modelFailure{i, steps, "invariant: " + what}
		}
		if what := fair.check(m, st, want); what != "" {
			return &modelFailure{i, steps, "invariant: " + what}
		}
	}
	return nil
}

// sameState compares the store's buckets and lease records with the
// model's at ms.
func (mc *modelChecker) sameState(r *runner, m *model, ms int64) string {
	now := r.at(ms)
	bs, err := mc.s.ListBuckets(r.ctx, store.ListBucketsRequest{Now: now})
	if err != nil {
		return "ListBuckets: " + err.Error()
	}
	var got, want []BucketExpect
	for _, b := range bs {
		got = append(got, r.bucketExpect(b))
	}
	for _, name := range slices.Sorted(maps.Keys(m.buckets)) {
		want = append(want, m.state(m.buckets[name], m.base+ms))
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("ListBuckets\n   got  %s\n   want %s", jsonString(got), jsonString(want))
	}
	ls, err := mc.s.Leases(r.ctx, store.LeaseQuery{Now: now})
	if err != nil {
		return "Leases: " + err.Error()
	}
	gotL, wantL := leaseLines(r, ls), m.leaseLines(r)
	if !slices.Equal(gotL, wantL) {
		return fmt.Sprintf("Leases\n   got  %q\n   want %q", gotL, wantL)
	}
	return ""
}

// leaseLines renders lease records as sorted lines: id, items sorted by
// dimension, creation and expiry offsets.
func leaseLines(r *runner, ls []store.LeaseRecord) []string {
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, leaseLine(l.ID, l.Items, r.rel(l.CreatedAt), r.rel(l.ExpiresAt), r.rel(l.ValidAt)))
	}
	slices.Sort(out)
	return out
}

func leaseLine(id store.LeaseID, items []store.Item, created, expires, valid int64) string {
	its := slices.Clone(items)
	slices.SortFunc(its, func(a, b store.Item) int { return strings.Compare(a.Dimension, b.Dimension) })
	if valid != 0 {
		return fmt.Sprintf("%s %v +%d..+%d valid +%d", id, its, created, expires, valid)
	}
	return fmt.Sprintf("%s %v +%d..+%d", id, its, created, expires)
}

// leaseLines renders the model's lease records like leaseLines.
func (m *model) leaseLines(r *runner) []string {
	var out []string
	for label, l := range m.leases {
		if l.record {
			var valid int64
			if l.validAt != 0 {
				valid = l.validAt - m.base
			}
			out = append(out, leaseLine(idFor(r.prefix+label), l.items, l.created-m.base, l.expires-m.base, valid))
		}
	}
	slices.Sort(out)
	return out
}

// cleanup reconciles every lease the sequence left and deletes its buckets,
// at a time after every expiry.
func (mc *modelChecker) cleanup(r *runner, steps []Step) {
	var last int64
	for _, st := range steps {
		last = max(last, st.AtMs+st.TTLMs)
	}
	end := r.at(last + int64(store.MaxTTL/time.Millisecond) + 1)
	for range 100 {
		res, err := mc.s.Reconcile(r.ctx, store.ReconcileRequest{Now: end})
		if err != nil || !res.More {
			break
		}
	}
	bs, _ := mc.s.ListBuckets(r.ctx, store.ListBucketsRequest{Now: end})
	for _, b := range bs {
		_ = mc.s.DeleteBucket(r.ctx, store.DeleteBucketRequest{Name: b.Name})
	}
}

// shrink removes steps from a failing sequence while it keeps failing, and
// returns the smallest failure found.
func (mc *modelChecker) shrink(seed uint64, steps []Step) *modelFailure {
	best := mc.check(seed, steps)
	if best == nil { // not reproducible on a clean store: report as is
		return &modelFailure{len(steps) - 1, steps, "(did not fail again when rerun alone)"}
	}
	for chunk := len(steps) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(best.steps); {
			cand := slices.Concat(best.steps[:i], best.steps[i+chunk:])
			if f := mc.check(seed, cand); f != nil && len(cand) > 0 {
				best = &modelFailure{f.step, cand[:f.step+1], f.what}
				continue
			}
			i++
		}
	}
	return best
}

// generate returns a random sequence for seed. Dimensions belong to one
// vendor per sequence when the store takes single-vendor acquisitions, else
// to two.
func (mc *modelChecker) generate(seed uint64) []Step {
	g := &gen{rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), v1: fmt.Sprintf("m%d", seed), v2: fmt.Sprintf("n%d", seed), resends: mc.h.DedupesOps}
	if mc.s != nil { // nil: a test of the generator alone, for the whole contract
		g.caps = capabilitiesOf(mc.s)
	}
	if mc.h.SingleVendorAcquire {
		g.v2 = g.v1
	}
	return g.sequence(modelSteps)
}

// pick returns a random element of xs.
func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }
