package pgstore

import (
	"testing"

	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/storetest"
)

// TestConformance runs the shared suite and the golden vectors against a
// real PostgreSQL, in caller-clock mode, each test on a fresh schema. The
// linearizability check gives each client a pool of its own, as separate
// processes would have.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore: func(tb testing.TB) store.Store { return newStore(tb) },
		OpenHandle: func(tb testing.TB, s store.Store) store.Store {
			h, err := New(pgtest.Pool(tb, nil), WithSchema(s.(*Store).Schema()), WithCallerClock())
			if err != nil {
				tb.Fatal(err)
			}
			return h
		},
		Goroutines: 32,
	})
}
