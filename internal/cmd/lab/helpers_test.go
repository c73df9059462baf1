package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/testing/clitest"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/internal/testing/testproc"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// redisAddr is the test redis-server, started once by TestMain.
var redisAddr string

// childEnv makes this test binary act as the sluice-lab binary, for
// bench's child processes.
const childEnv = "SLUICE_LAB_TEST_BENCH_CHILD"

// TestMain starts the real stores once for the whole binary: redis-server
// and PostgreSQL (or SLUICE_TEST_POSTGRES_URL's server). It fails, never
// skips, when one cannot be had.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" && len(os.Args) > 1 && (os.Args[1] == "bench-child" || os.Args[1] == "bench-vendor-child") {
		os.Exit(Main(context.Background(), os.Args[1:], clikit.OSEnv()))
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	redis.SetLogger(quietRedis{}) // as cmd/sluice-lab: no dial-retry lines
	if testproc.Short() {
		// No servers: the redis and postgres tests skip.
		return pgtest.Main(m)
	}
	srv, err := redistest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: lab tests need redis-server:", err)
		return 1
	}
	defer srv.Close()
	redisAddr = srv.Addr
	return pgtest.Main(m)
}

// quietRedis drops go-redis's own log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// run executes args in-process and returns stdout, stderr and the exit code.
func run(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, clikit.Env{
		Stdout: &out, Stderr: &errb,
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		BuildInfo: func() (*debug.BuildInfo, bool) { return nil, false },
	})
	return out.String(), errb.String(), code
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
	pgtest.SkipShort(t)
	u := pgtest.URL()
	if u == "" {
		t.Fatal("no PostgreSQL: TestMain did not run pgtest.Main")
	}
	schema := pgtest.Schema()
	t.Cleanup(func() {
		p := pgtest.Pool(t, nil)
		if _, err := p.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return &testEnv{t: t, url: u + sep + "schema=" + schema}
}

func (e *testEnv) run(args ...string) (string, string, int) {
	e.t.Helper()
	return e.exec(context.Background(), nil, args...)
}

// runWith runs args with mem as the memory:// store.
func runWith(t *testing.T, e *testEnv, mem store.Store, args ...string) (string, string, int) {
	t.Helper()
	return e.exec(context.Background(), mem, args...)
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
