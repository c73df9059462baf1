package pgstore

import (
	"testing"

	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/storetest"
)

// TestConformance runs the shared suite and the golden vectors against a
// real PostgreSQL, in caller-clock mode, each test on a fresh schema.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:   func(tb testing.TB) store.Store { return newStore(tb) },
		Goroutines: 32,
	})
}
