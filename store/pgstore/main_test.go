package pgstore

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
)

// TestMain starts one throwaway PostgreSQL for the whole binary (or uses
// SLUICE_TEST_POSTGRES_URL) and fails when it cannot.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// testTimeout bounds the operations of the stores the tests use unless a
// test sets its own: far above any statement's duration even on a loaded
// 2-core machine (single statements were seen to stall for up to 4 s at a
// load average of 14), so that only the fault tests ever time out.
const testTimeout = 30 * time.Second

// newStore returns a migrated store on a fresh schema of the shared server,
// closed with t. It uses the caller's clock unless opts say otherwise.
func newStore(t testing.TB, opts ...Option) *Store {
	t.Helper()
	return newStoreOn(t, pgtest.Pool(t, nil), append([]Option{WithCallerClock()}, opts...)...)
}

// newStoreOn returns a store over pool on a fresh schema, migrated with
// testTimeout whatever timeout opts set.
func newStoreOn(t testing.TB, pool *pgxpool.Pool, opts ...Option) *Store {
	t.Helper()
	schema := pgtest.Schema()
	setup, err := New(pool, WithSchema(schema), WithTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	if err := setup.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, err := New(pool, append([]Option{WithSchema(schema), WithTimeout(testTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// reopen returns another store on s's pool and schema, with s's clock mode
// and maximum skew, changed by opts.
func reopen(t testing.TB, s *Store, opts ...Option) *Store {
	t.Helper()
	base := []Option{WithSchema(s.schema), WithTimeout(s.timeout), WithMaxSkew(s.maxSkew)}
	if s.callerClock {
		base = append(base, WithCallerClock())
	}
	r, err := New(s.pool, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func put(t testing.TB, s store.Store, b store.Bucket) {
	t.Helper()
	if err := s.PutBucket(context.Background(), store.PutBucketRequest{Now: t0, Bucket: b}); err != nil {
		t.Fatal(err)
	}
}
