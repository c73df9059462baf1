package history_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/internal/testing/ddbtest"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/dynamostore"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/pgstore"
	"github.com/ontopix/sluice/store/redisstore"
)

// testTimeout bounds the tests' store calls.
const testTimeout = 30 * time.Second

// backends start a real server each (once per test) and return a function
// that opens a store on it: each call another process's store on the same
// data.
var backends = []struct {
	name  string
	start func(t *testing.T) func() store.Store
}{
	{"memory", func(t *testing.T) func() store.Store {
		mem := memstore.New()
		t.Cleanup(func() { mem.Close() })
		return func() store.Store { return mem }
	}},
	{"redis", func(t *testing.T) func() store.Store {
		srv := redistest.New(t)
		return func() store.Store {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
			st, err := redisstore.New(rdb, redisstore.WithPrefix("hist:"), redisstore.WithTimeout(testTimeout))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close(); rdb.Close() })
			return st
		}
	}},
	{"postgres", func(t *testing.T) func() store.Store {
		srv := pgtest.New(t)
		schema := pgtest.Schema()
		open := func() *pgstore.Store {
			st, err := pgstore.New(pgtest.PoolAt(t, srv.URL, nil), pgstore.WithSchema(schema), pgstore.WithTimeout(testTimeout))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		if err := open().Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return func() store.Store { return open() }
	}},
	{"dynamodb", func(t *testing.T) func() store.Store {
		srv := ddbtest.New(t)
		db := srv.Client(dynamostore.ClientOptions)
		table := srv.TableName("history")
		ctx := context.Background()
		if err := dynamostore.CreateTable(ctx, db, table); err != nil {
			t.Fatal(err)
		}
		if err := dynamostore.CreateUsageTable(ctx, db, table+dynamostore.UsageTableSuffix); err != nil {
			t.Fatal(err)
		}
		return func() store.Store {
			st, err := dynamostore.New(srv.Client(dynamostore.ClientOptions), table, dynamostore.WithTimeout(testTimeout))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
	}},
}

// TestExactOnEveryStore runs, on every store, two processes that acquire
// and settle at once, one of whose writes are each sent twice and one of
// which fails after it was written; then the first process stops and a
// third starts in its place. A fourth process, which recorded nothing,
// reads totals equal to what the Clients reported, by caller and in all,
// at a minute and an hour step; so does the third, with its own totals
// not yet written in memory.
func TestExactOnEveryStore(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			open := b.start(t)
			ctx := context.Background()
			w := newWant()
			// process starts a process: its Recorder, and a Client under
			// load; wait waits for the load's end.
			process := func(wrap func(store.Store) store.Store) (rec *history.Recorder, wait func()) {
				st := open()
				rec, err := history.New(wrap(st))
				if err != nil {
					t.Fatal(err)
				}
				if !rec.Writes() {
					t.Fatalf("%T keeps no usage history", st)
				}
				t.Cleanup(func() { _ = rec.Close(ctx) })
				c := newClient(t, st, rec.Observer(), w.observer())
				done := make(chan struct{})
				go func() {
					defer close(done)
					load(t, c, dims, callers, 3, 12, 0)
				}()
				return rec, func() { <-done }
			}
			same := func(st store.Store) store.Store { return st }
			var twice *usageStore
			first, wait1 := process(same)
			second, wait2 := process(func(st store.Store) store.Store {
				twice = newUsageStore(t, st)
				twice.twice = true
				return twice
			})
			wait1()
			wait2()
			if err := first.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			twice.mu.Lock()
			twice.fail, twice.written = 1, true
			twice.mu.Unlock()
			if err := second.Flush(ctx); !errors.Is(err, errInjected) {
				t.Fatalf("Flush = %v, want the injected failure", err)
			}
			if err := second.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := first.Close(ctx); err != nil {
				t.Fatal(err)
			}
			third, wait3 := process(same)
			wait3()
			for _, d := range dims {
				checkTotals(t, third, w, d, callers)
			}
			if err := third.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			reader, err := history.New(open())
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range dims {
				checkTotals(t, reader, w, d, callers)
			}
			if got := w.total(dims[0], "").Grants; got == 0 {
				t.Fatal("no grants")
			}
		})
	}
}
