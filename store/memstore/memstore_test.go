package memstore_test

import (
	"testing"

	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/storetest"
)

func harness() storetest.Harness {
	return storetest.Harness{
		ModelSequences:  3000, // about 2 s; -args -sluice.sequences=N runs more
		LinearizeRounds: 50,
		NewStore: func(tb testing.TB) store.Store {
			s := memstore.New()
			tb.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

func TestConformance(t *testing.T) { storetest.Run(t, harness()) }

func BenchmarkConformance(b *testing.B) { storetest.RunBenchmarks(b, harness()) }

// coreOnly is the memory store behind the core contract only: it hides
// every optional operation (store.Queuer, store.Cooler, store.Syncer) and
// capability (store.InProcess, store.FreedWatcher).
type coreOnly struct{ store.Store }

// TestConformanceCoreOnly runs the suite against a store that implements
// the core operations only: the groups of the optional operations are
// skipped, and the model, the linearizability check and the vectors run
// without them.
func TestConformanceCoreOnly(t *testing.T) {
	h := harness()
	h.ModelSequences = 500
	h.LinearizeRounds = 5
	newStore := h.NewStore
	h.NewStore = func(tb testing.TB) store.Store { return coreOnly{newStore(tb)} }
	storetest.Run(t, h)
}
