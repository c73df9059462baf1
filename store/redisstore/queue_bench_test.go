package redisstore

import (
	"testing"

	"github.com/ontopix/sluice/internal/testing/slotload"
	"github.com/ontopix/sluice/store"
)

// BenchmarkWaitInLineUtilisation measures how well waiting in line uses a
// concurrent dimension's slots on a standalone Redis (see slotload.Bench):
// run it with -bench WaitInLine -benchtime=1x.
func BenchmarkWaitInLineUtilisation(b *testing.B) {
	slotload.Bench(b, func(tb testing.TB, same store.Store) store.Store {
		if same == nil {
			return newStore(tb)
		}
		// Another process: its own client on the same keys.
		return newStoreOn(tb, newClient(tb), WithPrefix(same.(*Store).prefix))
	})
}
