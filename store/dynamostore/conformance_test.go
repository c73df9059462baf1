package dynamostore

import (
	"testing"

	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/storetest"
)

// TestConformance runs the shared suite and the golden vectors against
// DynamoDB Local on the fast path (the default).
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:   func(tb testing.TB) store.Store { return newStore(tb) },
		Goroutines: 16,
	})
}

// TestConformanceSeedsPath runs it on seed 000's two-round-trip path, which
// writes a lease record for every grant.
func TestConformanceSeedsPath(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:      func(tb testing.TB) store.Store { return newStore(tb, WithSeedsPath()) },
		AlwaysRecords: true,
		Goroutines:    16,
	})
}
