// Package pgtest runs real PostgreSQL servers for tests: a throwaway cluster
// made with initdb in a temporary directory, listening only on a free
// loopback port (never 5432), run as the postgres system user when the tests
// run as root, and killed with the test binary.
//
// Main starts one shared server per test binary, or uses the server named by
// SLUICE_TEST_POSTGRES_URL when that is set. It fails, never skips, when
// PostgreSQL cannot be had: tests must not pass by not running. Only under
// go test -short does Main start nothing, and then Pool, PoolAt and New
// skip the tests that call them.
//
// The PostgreSQL binaries are looked up in $SLUICE_TEST_POSTGRES_BIN, then
// /usr/lib/postgresql/{17,16,15}/bin, then PATH.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/internal/testing/testproc"
	"github.com/ontopix/sluice/internal/testing/testserver"
)

// EnvURL names the environment variable that points the tests at an
// existing server instead of starting one.
const EnvURL = "SLUICE_TEST_POSTGRES_URL"

// Server is one PostgreSQL cluster started by this package.
type Server struct {
	// URL is a pgx connection string for the postgres database.
	URL string
	// Port is the loopback TCP port.
	Port int

	bin  string
	dir  string
	cred *testproc.Credential
	cmd  *exec.Cmd
	done chan struct{}
}

var (
	sharedURL string
	schemas   atomic.Int64
)

// Main starts the shared server (or takes SLUICE_TEST_POSTGRES_URL), runs
// the tests and stops the server. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M) int {
	if testproc.Short() {
		return m.Run()
	}
	if u := os.Getenv(EnvURL); u != "" {
		sharedURL = u
		return m.Run()
	}
	s, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: PostgreSQL is required for these tests:", err)
		return 1
	}
	sharedURL = s.URL
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
	}
	return code
}

// URL returns the shared server's URL. Main must be running.
func URL() string { return sharedURL }

// Pool returns a pool on the shared server, closed when tb ends. configure,
// when non-nil, may change the pool's configuration first.
func Pool(tb testing.TB, configure func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	return PoolAt(tb, sharedURL, configure)
}

// PoolAt returns a pool on url, closed when tb ends.
func PoolAt(tb testing.TB, url string, configure func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	SkipShort(tb)
	if url == "" {
		tb.Fatal("pgtest: no server: call pgtest.Main from TestMain")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	if configure != nil {
		configure(cfg)
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(p.Close)
	return p
}

// SkipShort skips tb under go test -short, when no server runs.
func SkipShort(tb testing.TB) {
	tb.Helper()
	if testproc.Short() {
		tb.Skip("skipped in -short mode: needs PostgreSQL")
	}
}

// New starts a server of tb's own (see Start), closed when tb ends. It
// skips tb under go test -short and fails it when the server cannot start.
func New(tb testing.TB) *Server {
	tb.Helper()
	SkipShort(tb)
	s, err := Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// Schema returns a schema name no other test of this binary uses.
func Schema() string {
	return fmt.Sprintf("sluice_t%d_%d", os.Getpid(), schemas.Add(1))
}

// binDir finds the directory holding initdb and postgres.
func binDir() (string, error) {
	cands := []string{os.Getenv("SLUICE_TEST_POSTGRES_BIN")}
	for _, v := range []string{"17", "16", "15"} {
		cands = append(cands, "/usr/lib/postgresql/"+v+"/bin")
	}
	for _, d := range cands {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("pgtest: initdb not found (apt-get install -y postgresql-15, or set SLUICE_TEST_POSTGRES_BIN or " + EnvURL + ")")
}

// credential returns the postgres user's credential when running as root
// (initdb and postgres refuse to run as root), else nil.
func credential() (*testproc.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root needs the postgres system user (useradd -r -m postgres): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &testproc.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port != 5432 {
			return port, nil
		}
	}
	return 0, errors.New("pgtest: no free port")
}

// Start creates a cluster in a temporary directory and starts it.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, cred: cred}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "postgres", "-A", "trust",
		"--no-sync", "-E", "UTF8", "--locale=C.UTF-8")
	initdb.SysProcAttr = testproc.SysProcAttr(testproc.Attr{Cred: cred})
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	if s.Port, err = freePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
	if err := s.Restart(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// Restart starts the server process (again, after Kill) on the same port
// and data directory and waits until it accepts connections.
func (s *Server) Restart() error {
	log, err := os.OpenFile(filepath.Join(s.dir, "log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data(), "-p", strconv.Itoa(s.Port),
		"-k", s.dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = log, log
	// DieWithParent kills the postmaster (and so its backends) with the
	// test binary, even when it crashes (on Linux).
	cmd.SysProcAttr = testproc.SysProcAttr(testproc.Attr{Cred: s.cred, Group: true, DieWithParent: true})
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(s.done)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, s.URL)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return nil
		}
		select {
		case <-s.done:
			out, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("pgtest: postgres exited: %v\n%s", cmd.ProcessState, out)
		default:
		}
		if time.Now().After(deadline) {
			s.stop(syscall.SIGQUIT)
			return fmt.Errorf("pgtest: postgres not ready after 30s: %w", err)
		}
		time.Sleep(20 * time.Millisecond) // polling for readiness
	}
}

// Kill stops the server the way pg_ctl stop -m immediate does (SIGQUIT to
// the postmaster: no checkpoint, connections cut) and waits for it to exit.
// Committed transactions survive: the tests run with synchronous_commit on.
func (s *Server) Kill() error { return s.stop(syscall.SIGQUIT) }

// Address returns the server's connection URL.
func (s *Server) Address() string { return s.URL }

// Crash kills the postmaster and every backend at once with SIGKILL (what
// kill -9 of the whole server or the OOM killer does) and waits for the
// postmaster to exit. Restart then runs crash recovery; committed
// transactions survive.
func (s *Server) Crash() error {
	if s.cmd == nil {
		return nil
	}
	pid := s.cmd.Process.Pid
	// Freeze the postmaster first, so that it forks nothing new while its
	// children are listed and killed. (Every PostgreSQL child process calls
	// setsid, so signalling the process group would not reach them.)
	if err := testproc.Stop(pid); err != nil {
		return fmt.Errorf("pgtest: kill -STOP: %w", err)
	}
	for _, c := range testproc.Children(pid) {
		testproc.Kill(c)
	}
	if err := testproc.Kill(pid); err != nil {
		return fmt.Errorf("pgtest: kill -9: %w", err)
	}
	<-s.done
	s.cmd = nil
	return nil
}

// Stop freezes the postmaster and every backend with SIGSTOP: the server
// keeps its sockets open, the kernel still accepts connections, and nothing
// answers, as with a hung host. Cont undoes it.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return errors.New("pgtest: server not running")
	}
	pid := s.cmd.Process.Pid
	if err := testproc.Stop(pid); err != nil {
		return fmt.Errorf("pgtest: kill -STOP: %w", err)
	}
	for _, c := range testproc.Children(pid) {
		testproc.Stop(c)
	}
	return nil
}

// Cont continues a server frozen by Stop (SIGCONT), backends first.
func (s *Server) Cont() error {
	if s.cmd == nil {
		return errors.New("pgtest: server not running")
	}
	pid := s.cmd.Process.Pid
	for _, c := range testproc.Children(pid) {
		testproc.Continue(c)
	}
	if err := testproc.Continue(pid); err != nil {
		return fmt.Errorf("pgtest: kill -CONT: %w", err)
	}
	return nil
}

func (s *Server) stop(sig syscall.Signal) error {
	if s.cmd == nil {
		return nil
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return err
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
	return nil
}

// Close stops the server (fast shutdown) and removes its directory. A
// paused server is resumed first.
func (s *Server) Close() error {
	if s.cmd != nil {
		s.Cont()
	}
	err := s.stop(syscall.SIGINT)
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}

var _ testserver.Server = (*Server)(nil)
