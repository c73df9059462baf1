package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/redistest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// redisAddr is the test redis-server, started once by TestMain.
var redisAddr string

// childEnv makes this test binary act as the sluice binary, for bench's
// child processes.
const childEnv = "SLUICE_CLI_TEST_BENCH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" && len(os.Args) > 1 && os.Args[1] == "bench-child" {
		os.Exit(Main(context.Background(), os.Args[1:], OSEnv()))
	}
	flag.Parse()
	srv, err := redistest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cli tests need redis-server:", err)
		os.Exit(1)
	}
	redisAddr = srv.Addr
	code := m.Run()
	srv.Close()
	os.Exit(code)
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

// redisEnv isolates the test under its own key prefix.
func redisEnv(t *testing.T) *testEnv {
	return &testEnv{t: t, url: "redis://" + redisAddr + "/0?prefix=" + t.Name() + ":"}
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

// runWith runs args with mem as the memory:// store.
func runWith(t *testing.T, e *testEnv, mem store.Store, args ...string) (string, string, int) {
	t.Helper()
	return e.exec(context.Background(), mem, args...)
}

func (e *testEnv) exec(ctx context.Context, mem store.Store, args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, LookupEnv: func(k string) (string, bool) {
		if k == "SLUICE_STORE" {
			return e.url, true
		}
		v, ok := e.env[k]
		return v, ok
	}}
	if e.mem != nil {
		env.Memory = e.mem
	}
	if e.clock.Load() != 0 {
		env.Clock = sluice.ClockFunc(func() time.Time { return time.UnixMilli(e.clock.Load()).UTC() })
	}
	if mem != nil {
		env.Memory = mem
	}
	code := Main(ctx, args, env)
	return out.String(), errb.String(), code
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
