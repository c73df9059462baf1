package dynamostore

import (
	"testing"

	"github.com/ontopix/sluice/internal/testing/slotload"
	"github.com/ontopix/sluice/store"
)

// BenchmarkWaitInLineUtilisation measures how well waiting in line uses a
// concurrent dimension's slots on DynamoDB Local (see slotload.Bench): run
// it with -bench WaitInLine -benchtime=1x.
func BenchmarkWaitInLineUtilisation(b *testing.B) {
	slotload.Bench(b, func(tb testing.TB, same store.Store) store.Store {
		if same == nil {
			return newStore(tb)
		}
		// Another process: its own client on the same table.
		return openHandle(tb, same)
	})
}
