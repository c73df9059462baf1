package pgstore_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/pgstore"
)

// Example builds a PostgreSQL store, creates or upgrades its schema, and
// puts a Client on it. It needs a PostgreSQL server, so it is compiled but
// not run by go test. The password comes from PGPASSWORD, not the URL.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://sluice@127.0.0.1:5432/sluice?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstore.New(pool, pgstore.WithSchema("sluice"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil { // safe to run from every replica at once
		log.Fatal(err)
	}
	client, err := sluice.New(st)
	if err != nil {
		log.Fatal(err)
	}
	res, err := client.Acquire(ctx, "openai#rpm")
	if err != nil {
		log.Fatal(err)
	}
	log.Println(res.Outcome)
}
