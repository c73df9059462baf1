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
