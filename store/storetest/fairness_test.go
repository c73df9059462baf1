package storetest

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestModelUsageInvariant runs the reference model alone on random
// sequences rich in reservations and cancellations and checks the usage
// invariant after every step: nothing a reservation or a cancellation
// does lets a bucket's usage at valid instants exceed its capacity plus
// its refill over any window.
func TestModelUsageInvariant(t *testing.T) {
	for seed := uint64(1); seed <= 3000; seed++ {
		g := &gen{rng: rand.New(rand.NewPCG(seed, seed^0xfa1)), v1: fmt.Sprintf("m%d", seed), v2: fmt.Sprintf("n%d", seed)}
		steps := g.sequence(modelSteps)
		m := newModel(0)
		u, inv := newUsageCheck(), newInvariants()
		for i, st := range steps {
			e := m.apply(st)
			if what := u.check(m, st, e); what != "" {
				t.Fatalf("seed %d step %d %s: %s\n%s", seed, i, jsonString(st), what, jsonString(steps[:i+1]))
			}
			if what := inv.check(m, st, e); what != "" {
				t.Fatalf("seed %d step %d %s: %s\n%s", seed, i, jsonString(st), what, jsonString(steps[:i+1]))
			}
		}
	}
}
