package remotestore_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/internal/testing/ddbtest"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/dynamostore"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/pgstore"
	"github.com/ontopix/sluice/store/redisstore"
	"github.com/ontopix/sluice/store/remotestore"
	"github.com/ontopix/sluice/store/storetest"
)

// redisAddr is the test redis-server, started once by TestMain.
var redisAddr string

// ddb is DynamoDB Local, started by TestMain while the other servers start.
var (
	ddb      *ddbtest.Server
	ddbErr   error
	ddbReady = make(chan struct{})
)

func TestMain(m *testing.M) {
	go func() {
		ddb, ddbErr = ddbtest.Start()
		close(ddbReady)
	}()
	defer func() {
		<-ddbReady
		if ddb != nil {
			_ = ddb.Close()
		}
	}()
	srv, err := redistest.Start()
	if err == nil {
		redisAddr = srv.Addr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: remotestore tests need redis-server:", err)
		os.Exit(1)
	}
	code := pgtest.Main(m)
	_ = srv.Close()
	<-ddbReady
	if ddb != nil {
		_ = ddb.Close()
	}
	os.Exit(code)
}

// door serves backing's store door and returns its URL.
func door(tb testing.TB, backing store.Store) string {
	hs := httptest.NewServer(remotestore.Handler(backing))
	tb.Cleanup(hs.Close)
	return hs.URL
}

// open opens a remote store on the door at url.
func open(tb testing.TB, url string, opts ...remotestore.Option) store.Store {
	tb.Helper()
	s, err := remotestore.Open(context.Background(), url, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// urls remembers the door of each remote store, for OpenHandle, and
// backings the store behind it, for PrepareUsage.
var urls, backings sync.Map // store.Store → string, store.Store

func harness(backing func(tb testing.TB) store.Store, opts ...remotestore.Option) storetest.Harness {
	return storetest.Harness{
		ModelSequences:  100, // through HTTP: SLUICE_MODEL_SEQUENCES=N runs more
		LinearizeRounds: 5,
		Goroutines:      16,
		NewStore: func(tb testing.TB) store.Store {
			b := backing(tb)
			url := door(tb, b)
			s := open(tb, url, opts...)
			urls.Store(s, url)
			backings.Store(s, b)
			return s
		},
		OpenHandle: func(tb testing.TB, s store.Store) store.Store {
			url, _ := urls.Load(s)
			return open(tb, url.(string), opts...)
		},
	}
}

var prefixes atomic.Int64

// TestConformanceMemory runs the suite through the door to a memory store.
func TestConformanceMemory(t *testing.T) {
	storetest.Run(t, harness(func(tb testing.TB) store.Store { return memstore.New() }))
}

// TestConformanceRedis runs the suite through the door to a real
// redis-server, deciding on the caller's clock.
func TestConformanceRedis(t *testing.T) {
	h := harness(func(tb testing.TB) store.Store {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
		tb.Cleanup(func() { _ = rdb.Close() })
		s, err := redisstore.New(rdb, redisstore.WithCallerClock(), redisstore.WithPrefix(fmt.Sprintf("rs%d:", prefixes.Add(1))))
		if err != nil {
			tb.Fatal(err)
		}
		return s
	})
	h.DedupesOps = true
	storetest.Run(t, h)
}

// TestConformancePostgres runs the suite through the door to a real
// PostgreSQL, deciding on the caller's clock, on a fresh schema per test.
func TestConformancePostgres(t *testing.T) {
	storetest.Run(t, harness(func(tb testing.TB) store.Store {
		pool := pgtest.Pool(tb, nil)
		schema := pgtest.Schema()
		setup, err := pgstore.New(pool, pgstore.WithSchema(schema))
		if err != nil {
			tb.Fatal(err)
		}
		if err := setup.Migrate(context.Background()); err != nil {
			tb.Fatal(err)
		}
		s, err := pgstore.New(pool, pgstore.WithSchema(schema), pgstore.WithCallerClock())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		return s
	}))
}

// BenchmarkConformance runs the suite's benchmarks through the door to a
// memory store and to Redis.
func BenchmarkConformance(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		storetest.RunBenchmarks(b, harness(func(tb testing.TB) store.Store { return memstore.New() }))
	})
	b.Run("redis", func(b *testing.B) {
		storetest.RunBenchmarks(b, harness(func(tb testing.TB) store.Store {
			rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
			tb.Cleanup(func() { _ = rdb.Close() })
			s, err := redisstore.New(rdb, redisstore.WithCallerClock(), redisstore.WithPrefix(fmt.Sprintf("rb%d:", prefixes.Add(1))))
			if err != nil {
				tb.Fatal(err)
			}
			return s
		}))
	})
}

// TestConformanceDynamoDB runs the suite through the door to DynamoDB
// Local, on a fresh table per test: the SDKs' table (partition key
// vendor_dimension) without TTL, whose sweeper would delete the suite's
// records, dated in the past.
func TestConformanceDynamoDB(t *testing.T) {
	<-ddbReady
	if ddbErr != nil {
		t.Fatalf("DynamoDB Local is required: %v", ddbErr)
	}
	h := harness(func(tb testing.TB) store.Store {
		db := ddb.Client(dynamostore.ClientOptions)
		table := ddb.TableName("door")
		ctx := context.Background()
		if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String(table),
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("vendor_dimension"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("vendor_dimension"), KeyType: types.KeyTypeHash}},
			BillingMode:          types.BillingModePayPerRequest,
		}); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		})
		s, err := dynamostore.New(db, table, dynamostore.WithTimeout(30*time.Second))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		return s
	}, remotestore.WithTimeout(30*time.Second)) // as the store's own: the emulator is slow
	h.ModelSequences = 20 // each sequence is hundreds of round trips to a slow emulator
	h.PrepareUsage = func(tb testing.TB, s store.Store) {
		b, _ := backings.Load(s)
		ds := b.(*dynamostore.Store)
		if err := dynamostore.CreateUsageTable(context.Background(), ddb.Client(dynamostore.ClientOptions), ds.UsageTable()); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			_, _ = ddb.Client(dynamostore.ClientOptions).DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(ds.UsageTable())})
		})
	}
	storetest.Run(t, h)
}
