package storetest

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestGeneratorAgreesWithChecker replays generated sequences on the model
// at the generator's time base and at the time bases the checker uses
// (one per sequence run, two days apart): the outcomes must be the same.
// The generator chooses each step from its model's state (a live lease to
// settle, a pending reservation to cancel), so a step that only makes sense
// at its own base would reach the checker's model as a step no caller can
// send, and the checker would stop on it instead of testing the store.
// SLUICE_LONG=1 runs 60,000 seeds.
func TestGeneratorAgreesWithChecker(t *testing.T) {
	seeds := []uint64{56004} // a reservation made at the base, valid at once
	n := uint64(2000)
	if os.Getenv("SLUICE_LONG") != "" {
		n = 60000
	}
	for s := range n {
		seeds = append(seeds, s+1)
	}
	mc := &modelChecker{}
	for _, seed := range seeds {
		steps := mc.generate(seed)
		at := Base.UnixMilli() + int64(seed%7+1)*int64(48*time.Hour/time.Millisecond)
		if i, what := divergence(steps, genBase(), at); what != "" {
			t.Fatalf("seed %d, step %d (%s): %s", seed, i, jsonString(steps[i]), what)
		}
	}
}

// divergence applies steps to two models at bases a and b and returns the
// first step whose outcomes differ, and how.
func divergence(steps []Step, a, b int64) (int, string) {
	ma, mb := newModel(a), newModel(b)
	for i, st := range steps {
		ea, pa := applyRecovered(ma, st)
		eb, pb := applyRecovered(mb, st)
		if pa != "" || pb != "" {
			return i, fmt.Sprintf("the model panicked: %q at base %d, %q at base %d", pa, a, pb, b)
		}
		if ja, jb := jsonString(ea), jsonString(eb); ja != jb {
			return i, fmt.Sprintf("base %d gives %s, base %d gives %s", a, ja, b, jb)
		}
	}
	return 0, ""
}

func applyRecovered(m *model, st Step) (e Expect, panicked string) {
	defer func() {
		if r := recover(); r != nil {
			panicked = fmt.Sprint(r)
		}
	}()
	return m.apply(st), ""
}
