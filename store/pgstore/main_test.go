package pgstore

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/internal/pgtest"
	"github.com/ontopix/sluice/store"
)

// TestMain starts one throwaway PostgreSQL for the whole binary (or uses
// SLUICE_TEST_POSTGRES_URL) and fails when it cannot.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// newStore returns a migrated store on a fresh schema of the shared server,
// closed with t. It uses the caller's clock unless opts say otherwise.
func newStore(t testing.TB, opts ...Option) *Store {
	t.Helper()
	return newStoreOn(t, pgtest.Pool(t, nil), append([]Option{WithCallerClock()}, opts...)...)
}

// newStoreOn returns a migrated store over pool on a fresh schema.
func newStoreOn(t testing.TB, pool *pgxpool.Pool, opts ...Option) *Store {
	t.Helper()
	s, err := New(pool, append([]Option{WithSchema(pgtest.Schema())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func put(t testing.TB, s store.Store, b store.Bucket) {
	t.Helper()
	if err := s.PutBucket(context.Background(), t0, b, false); err != nil {
		t.Fatal(err)
	}
}
