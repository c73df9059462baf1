package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/pgstore"
	"github.com/ontopix/sluice/store/storeurl"
)

// openers opens the PostgreSQL URLs only.
func openers() storeurl.Openers { return storeurl.Openers{pgstore.URLOpener()} }

// noEnv is an environment with nothing set.
func noEnv(string) (string, bool) { return "", false }

// TestWithoutMigrate: migrate=true (the default) would run the migration
// at once, so against a dead server Open fails as unavailable, not as a bad
// URL; storeurl.WithoutMigrate opens without touching the server.
func TestWithoutMigrate(t *testing.T) {
	ctx := context.Background()
	url := "postgres://sluice@127.0.0.1:1/db?sslmode=disable&timeout=1s&connect_timeout=1"
	if _, err := openers().Open(ctx, url, storeurl.WithLookupEnv(noEnv)); err == nil || errors.Is(err, storeurl.ErrBadURL) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open with migrate on a dead server: %v; want store.ErrUnavailable", err)
	}
	st, err := openers().Open(ctx, url, storeurl.WithLookupEnv(noEnv), storeurl.WithoutMigrate())
	if err != nil {
		t.Fatalf("Open storeurl.WithoutMigrate: %v", err)
	}
	st.Close()
}

// TestOpenAdminHandle: a postgres:// store exposes its *pgstore.Store.
func TestOpenAdminHandle(t *testing.T) {
	op, err := openers().OpenDetailed(context.Background(), "postgres://127.0.0.1:1/db?schema=s1&sslmode=disable", storeurl.Options{NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if pg, ok := op.Admin.(*pgstore.Store); !ok || pg.Schema() != "s1" || op.Table != "" {
		t.Errorf("postgres: %+v", op)
	}
	op.Close()
}
