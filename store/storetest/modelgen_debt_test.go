package storetest

import (
	"testing"

	"github.com/ontopix/sluice/bucket"
)

// TestGeneratorReachesKeptDebt checks that the model-based test exercises
// the rule that a settlement never forgives debt: among the first 2,000
// sequences it generates (those every store runs in CI), charges must
// land on balances already below the debt floor and go deeper, and
// charges must be clamped at one max_debt below a balance in debt. A
// generator that never got there would leave the rule untested on the
// stores.
func TestGeneratorReachesKeptDebt(t *testing.T) {
	mc := &modelChecker{}
	var deeper, clamped int
	for num := range uint64(2000) {
		m := newModel(genBase())
		for _, st := range mc.generate(num + 1) {
			var before, floor int64
			var tracked bool
			if st.Op == "adjust" && st.Delta > 0 {
				if b := m.buckets[st.Dimension]; b != nil && b.lim.Amount > 0 && b.st.Reserved <= m.base+st.AtMs {
					before = bucket.Refill(b.lim, b.st, max(m.base+st.AtMs, b.st.Last)).Tokens
					floor, tracked = b.lim.Floor, before < b.lim.Floor
				}
			}
			e, panicked := applyRecovered(m, st)
			if panicked != "" || !tracked || e.Error != "" {
				continue
			}
			deeper++
			if e.Applied < st.Delta*bucket.Milli && e.Applied == -floor {
				clamped++
			}
		}
	}
	t.Logf("charges on a balance below the floor: %d, of which clamped at one max_debt: %d", deeper, clamped)
	if deeper < 50 || clamped < 10 {
		t.Errorf("the generator reaches kept debt %d times (%d clamped), want at least 50 (10)", deeper, clamped)
	}
}
