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
// It replays the first 2,000 sequences the model-based test generates
// (60,000 with SLUICE_LONG=1), and sequence 56004, whose first steps make
// a reservation at the start of the sequence, valid at once: at a base of
// 0 that reservation is valid at instant 0, which the model reads as none.
func TestGeneratorAgreesWithChecker(t *testing.T) {
	numbers := []uint64{56004}
	n := uint64(2000)
	if os.Getenv("SLUICE_LONG") != "" {
		n = 60000
	}
	for i := range n {
		numbers = append(numbers, i+1)
	}
	mc := &modelChecker{}
	for _, num := range numbers {
		steps := mc.generate(num)
		at := Base.UnixMilli() + int64(num%7+1)*int64(48*time.Hour/time.Millisecond)
		if i, what := divergence(steps, genBase(), at); what != "" {
			t.Fatalf("sequence %d (on a store: go test -run TestConformance/Model -args -sluice.seed=%d), step %d (%s): %s", num, num, i, jsonString(steps[i]), what)
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
