package cli

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/internal/testing/clitest"
	"github.com/ontopix/sluice/internal/testing/ddbtest"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/internal/testing/testproc"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// redisAddr is the test redis-server, started once by TestMain.
var redisAddr string

// ddb is the test DynamoDB Local, started once by TestMain (in the
// background: see ddbServer); ddbErr is why it could not start.
var (
	ddb      *ddbtest.Server
	ddbErr   error
	ddbReady = make(chan struct{})
)

// TestMain starts the real stores once for the whole binary: redis-server,
// DynamoDB Local and PostgreSQL (or SLUICE_TEST_POSTGRES_URL's server).
// It fails, never skips, when one cannot be had: redis-server and
// PostgreSQL before any test runs, DynamoDB Local (whose JVM starts while
// the others do) in every test that uses it.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	// The AWS SDK's default chain, which dynamodb:// URLs use, needs some
	// credentials to sign requests; DynamoDB Local accepts any.
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_EC2_METADATA_DISABLED": "true"} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	redis.SetLogger(quietRedis{}) // as cmd/sluice: no dial-retry lines from TestUnavailable
	if testproc.Short() {
		// No servers: the redis, postgres and dynamodb tests skip.
		close(ddbReady)
		return pgtest.Main(m)
	}
	go func() {
		ddb, ddbErr = ddbtest.Start()
		close(ddbReady)
	}()
	defer func() {
		<-ddbReady
		ddb.Close()
	}()
	srv, err := redistest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: cli tests need redis-server:", err)
		return 1
	}
	defer srv.Close()
	redisAddr = srv.Addr
	return pgtest.Main(m)
}

// quietRedis drops go-redis's own log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// ddbServer waits for DynamoDB Local and fails tb if it did not start.
func ddbServer(tb testing.TB) *ddbtest.Server {
	tb.Helper()
	<-ddbReady
	if testproc.Short() {
		tb.Skip("skipped in -short mode: needs DynamoDB Local")
	}
	if ddbErr != nil {
		tb.Fatalf("FAIL: DynamoDB Local is required for these tests: %v", ddbErr)
	}
	return ddb
}

// testEnv runs commands in-process against one store URL; for memory://
// every command shares one memstore, on a clock the test moves.
type testEnv struct {
	t     *testing.T
	url   string
	env   map[string]string
	mem   *memstore.Store
	clock atomic.Int64 // Unix ms; 0 means the wall clock
}

// t0 is the fixed start of memory tests' clock.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func memEnv(t *testing.T) *testEnv {
	e := &testEnv{t: t, url: "memory://", mem: memstore.New()}
	e.clock.Store(t0.UnixMilli())
	return e
}

// redisKeyspaces numbers the tests' key prefixes, so that -count=N runs
// never share one.
var redisKeyspaces atomic.Int64

// redisEnv isolates the test under its own key prefix.
func redisEnv(t *testing.T) *testEnv {
	if testproc.Short() {
		t.Skip("skipped in -short mode: needs redis-server")
	}
	return &testEnv{t: t, url: fmt.Sprintf("redis://%s/0?prefix=%s.%d:", redisAddr, t.Name(), redisKeyspaces.Add(1))}
}

// pgEnv isolates the test in its own schema of the test PostgreSQL,
// dropped when the test ends.
func pgEnv(t *testing.T) *testEnv {
	return &testEnv{t: t, url: pgURL(t, pgSchema(t))}
}

// pgSchema returns a fresh schema name, dropped with t.
func pgSchema(t *testing.T) string {
	pgtest.SkipShort(t)
	schema := pgtest.Schema()
	t.Cleanup(func() {
		p := pgtest.Pool(t, nil)
		if _, err := p.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// pgURL is the test PostgreSQL's URL with schema= and any extra options.
func pgURL(t *testing.T, schema string, extra ...string) string {
	pgtest.SkipShort(t)
	u := pgtest.URL()
	if u == "" {
		t.Fatal("no PostgreSQL: TestMain did not run pgtest.Main")
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	u += sep + "schema=" + schema
	for _, x := range extra {
		u += "&" + x
	}
	return u
}

// ddbEnv isolates the test in its own table of the test DynamoDB Local,
// deleted when the test ends. The table has no TTL: DynamoDB Local's TTL
// sweeper would delete expired lease records before reconcile does.
func ddbEnv(t *testing.T) *testEnv {
	return &testEnv{t: t, url: ddbURL(t, newDDBTable(t))}
}

// ddbURL is the dynamodb:// URL of table on the test DynamoDB Local.
func ddbURL(t *testing.T, table string) string {
	return "dynamodb://" + table + "?region=us-east-1&endpoint=" + ddbServer(t).Endpoint
}

// newDDBTable creates the store's table, without TTL, under a fresh name.
func newDDBTable(t *testing.T) string {
	srv := ddbServer(t)
	name := srv.TableName("cli")
	createDDBTable(t, name, ddbPartitionKey)
	return name
}

// createDDBTable creates an on-demand table keyed by the string key,
// deleted with t.
func createDDBTable(t *testing.T, name, key string) {
	t.Helper()
	db := ddbServer(t).Client()
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	dropDDBTable(t, name)
}

// dropDDBTable deletes the table when t ends.
func dropDDBTable(t *testing.T, name string) {
	t.Cleanup(func() {
		_, _ = ddbServer(t).Client().DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
}

// stores runs f as a subtest on a fresh environment of every store.
func stores(t *testing.T, f func(t *testing.T, e *testEnv)) {
	for _, s := range []struct {
		name string
		env  func(*testing.T) *testEnv
	}{{"memory", memEnv}, {"redis", redisEnv}, {"postgres", pgEnv}, {"dynamodb", ddbEnv}} {
		t.Run(s.name, func(t *testing.T) { f(t, s.env(t)) })
	}
}

func (e *testEnv) advance(d time.Duration) { e.clock.Add(d.Milliseconds()) }

func (e *testEnv) run(args ...string) (string, string, int) {
	e.t.Helper()
	return e.runCtx(context.Background(), args...)
}

func (e *testEnv) runCtx(ctx context.Context, args ...string) (string, string, int) {
	e.t.Helper()
	return e.exec(ctx, nil, args...)
}

func (e *testEnv) exec(ctx context.Context, mem store.Store, args ...string) (string, string, int) {
	r := clitest.Run{URL: e.url, Vars: e.env, ClockMs: e.clock.Load}
	if e.mem != nil {
		r.Memory = e.mem
	}
	if mem != nil {
		r.Memory = mem
	}
	return r.Exec(ctx, Main, args...)
}

// ok runs args and fails the test unless the exit code is 0.
func (e *testEnv) ok(args ...string) string {
	e.t.Helper()
	out, errs, code := e.run(args...)
	if code != 0 {
		e.t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errs)
	}
	return out
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (go test -update rewrites it)\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// deadPort returns a loopback port nothing listens on.
func deadPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return p
}

// cliLimits declares the buckets the tests apply: one of each type.
const cliLimits = "dimensions:\n  openai#rpm:\n    type: requests\n    capacity: 600\n    per: 1m\n  openai#tpm:\n    type: tokens\n    capacity: 60000\n    per: 1m\n  elevenlabs#concurrent:\n    type: concurrent\n    capacity: 3\n"

// writeLimits writes cliLimits to a file and returns its path.
func writeLimits(t *testing.T) string {
	p := t.TempDir() + "/limits.yaml"
	if err := os.WriteFile(p, []byte(cliLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
