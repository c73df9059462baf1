package pgstore

import (
	"testing"

	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/internal/testing/slotload"
	"github.com/ontopix/sluice/store"
)

// BenchmarkWaitInLineUtilisation measures how well waiting in line uses a
// concurrent dimension's slots on PostgreSQL (see slotload.Bench): run it
// with -bench WaitInLine -benchtime=1x.
func BenchmarkWaitInLineUtilisation(b *testing.B) {
	slotload.Bench(b, func(tb testing.TB, same store.Store) store.Store {
		if same == nil {
			return newStore(tb)
		}
		// Another process: its own pool on the same schema.
		s, err := New(pgtest.Pool(tb, nil), WithSchema(same.(*Store).Schema()), WithCallerClock())
		if err != nil {
			tb.Fatal(err)
		}
		return s
	})
}
