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
		NewStore:       func(tb testing.TB) store.Store { return newStore(tb) },
		OpenHandle:     openHandle,
		Goroutines:     16,
		ModelSequences: modelSequences,
		PrepareUsage:   prepareUsage,
	})
}

// TestConformanceSeedsPath runs it on the original two-round-trip path (read, then transact), which
// writes a lease record for every grant.
func TestConformanceSeedsPath(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:       func(tb testing.TB) store.Store { return newStore(tb, WithReadThenTransact()) },
		AlwaysRecords:  true,
		OpenHandle:     openHandle,
		Goroutines:     16,
		ModelSequences: modelSequences,
		PrepareUsage:   prepareUsage,
	})
}

// modelSequences bounds the model-based test's random sequences on
// DynamoDB Local (each step is a round trip to a JVM), so that it adds
// seconds, not minutes, to go test; SLUICE_MODEL_SEQUENCES=300 (or
// -args -sluice.sequences=300) runs the suite's default.
const modelSequences = 40

// prepareUsage creates s's usage table, deleted with tb.
func prepareUsage(tb testing.TB, s store.Store) {
	tb.Helper()
	createUsageTable(tb, s.(*Store))
}

// openHandle opens another store on s's table through a client of its own,
// as another process would.
func openHandle(tb testing.TB, s store.Store) store.Store {
	d := s.(*Store)
	var opts []Option
	if d.readFirst {
		opts = append(opts, WithReadThenTransact())
	}
	return openStore(tb, newClient(), d.table, opts...)
}
