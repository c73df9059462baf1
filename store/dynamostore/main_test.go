package dynamostore

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ontopix/sluice/internal/testing/crashtest"
	"github.com/ontopix/sluice/internal/testing/ddbtest"
	"github.com/ontopix/sluice/internal/testing/testproc"
	"github.com/ontopix/sluice/store"
)

// server is the DynamoDB Local every test of this binary shares.
var server *ddbtest.Server

func TestMain(m *testing.M) {
	if code, ok := crashtest.Child(crashConfig); ok {
		os.Exit(code)
	}
	if testproc.SkipPackage("DynamoDB Local") {
		os.Exit(0)
	}
	var err error
	if server, err = ddbtest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: DynamoDB Local is required for these tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	server.Close()
	os.Exit(code)
}

// newClient returns a client of the shared server with the store's
// recommended SDK options and any extra ones.
func newClient(opts ...func(*dynamodb.Options)) *dynamodb.Client {
	return server.Client(append([]func(*dynamodb.Options){ClientOptions}, opts...)...)
}

// newTable creates a fresh table without TTL (the tests use fixed times in
// the past, which DynamoDB Local's TTL sweeper would act on), deleted with
// tb.
func newTable(tb testing.TB, db *dynamodb.Client) string {
	tb.Helper()
	name := server.TableName("sluice")
	ctx := context.Background()
	if err := createTable(ctx, db, name, false); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_, _ = server.Client().DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// newStore returns a store on a fresh table.
func newStore(tb testing.TB, opts ...Option) *Store {
	tb.Helper()
	db := newClient()
	return openStore(tb, db, newTable(tb, db), opts...)
}

func openStore(tb testing.TB, db *dynamodb.Client, table string, opts ...Option) *Store {
	tb.Helper()
	// A loaded test machine can stall DynamoDB Local past the 5 s default;
	// tests of the bound itself pass their own WithTimeout, which wins.
	s, err := New(db, table, append([]Option{WithTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

var t0 = time.UnixMilli(1_700_000_000_000)

func put(tb testing.TB, s store.Store, now time.Time, b store.Bucket) {
	tb.Helper()
	if err := s.PutBucket(context.Background(), store.PutBucketRequest{Now: now, Bucket: b}); err != nil {
		tb.Fatal(err)
	}
}

// testingProcs is GOMAXPROCS, which RunParallel multiplies by parallelism.
func testingProcs() int { return runtime.GOMAXPROCS(0) }
