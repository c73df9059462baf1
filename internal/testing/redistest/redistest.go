// Package redistest starts real redis-server processes for tests: a
// standalone server or a Cluster of masters, on free loopback ports (never
// 6379), in a temporary directory, killed with their parent test binary.
//
// redis-server (and, for a Cluster, redis-cli) must be on PATH; the helpers
// return an error when they are not, and tests must fail on it, not skip.
// Only under go test -short are they skipped: New skips its test, and a
// TestMain that starts shared servers calls testproc.SkipPackage first.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/testing/testproc"
	"github.com/ontopix/sluice/internal/testing/testserver"
)

// Server is one redis-server process.
type Server struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	// Port is the TCP port.
	Port int
	dir  string
	args []string
	cmd  *exec.Cmd
	exit chan struct{}
}

// Binaries checks that the named programs are on PATH.
func Binaries(names ...string) error {
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			return fmt.Errorf("redistest: %s is not on PATH (install it: apt-get install -y redis-server): %w", n, err)
		}
	}
	return nil
}

// freePort returns a loopback port that is free, and whose cluster bus port
// (port+10000) is free too when bus is set.
func freePort(bus bool) (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if port == 6379 || (bus && port+10000 > 65535) {
			l.Close()
			continue
		}
		if bus {
			lb, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
			if err != nil {
				l.Close()
				continue
			}
			lb.Close()
		}
		l.Close()
		return port, nil
	}
	return 0, errors.New("redistest: no free port found")
}

// Start starts a standalone redis-server with extra arguments (e.g.
// "--cluster-enabled", "yes") and waits until it answers PING.
func Start(extra ...string) (*Server, error) {
	if err := Binaries("redis-server"); err != nil {
		return nil, err
	}
	cluster := false
	for _, a := range extra {
		if a == "--cluster-enabled" {
			cluster = true
		}
	}
	var last error
	for range 3 { // another process may take the port between probe and bind
		port, err := freePort(cluster)
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "redistest-*")
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, dir: dir}
		s.args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no"}, extra...)
		if last = s.start(); last == nil {
			return s, nil
		}
		os.RemoveAll(dir)
	}
	return nil, last
}

// New starts a standalone redis-server for tb (see Start), closed when tb
// ends. It skips tb under go test -short and fails it when the server
// cannot start.
func New(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	if testproc.Short() {
		tb.Skip("skipped in -short mode: needs redis-server")
	}
	s, err := Start(extra...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func (s *Server) start() error {
	cmd := exec.Command("redis-server", s.args...)
	cmd.SysProcAttr = testproc.SysProcAttr(testproc.Attr{Group: true, DieWithParent: true})
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	s.cmd = cmd
	s.exit = make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.exit) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if out, err := s.Do("PING"); err == nil && out == "PONG" {
			return nil
		}
		select {
		case <-s.exit:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redistest: redis-server exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			return errors.New("redistest: redis-server did not answer PING within 10s")
		}
		time.Sleep(5 * time.Millisecond) // polling for readiness
	}
}

// Do sends one inline command over a fresh connection and returns the first
// reply line without its type byte (e.g. "PONG", "OK", "3").
func (s *Server) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply")
	}
	if line[0] == '-' {
		return "", errors.New(line[1:])
	}
	return line[1:], nil
}

func (s *Server) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		<-s.exit
	}
}

// Kill kills the server (SIGKILL, as in a crash) and waits for it to exit.
// Restart brings it back on the same port: empty, unless it was started
// with persistence (see Persistent).
func (s *Server) Kill() error { s.kill(); return nil }

// Address returns the server's host:port.
func (s *Server) Address() string { return s.Addr }

// Terminate shuts the server down cleanly (SIGTERM: a persistent server
// writes its files first) and waits for it to exit.
func (s *Server) Terminate() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = testproc.Terminate(s.cmd.Process.Pid)
		<-s.exit
	}
}

// Restart starts a stopped server again on the same port, with the same
// arguments and directory.
func (s *Server) Restart() error { return s.start() }

// Persistent are Start's extra arguments for a server whose every write
// reaches its append-only file before it is acknowledged (appendonly yes,
// appendfsync always), so that a SIGKILLed server restarts with every
// acknowledged write.
var Persistent = []string{"--appendonly", "yes", "--appendfsync", "always"}

// StartReplica starts a server replicating master (on another free
// loopback port) and waits until its link to master is up and the initial
// sync is done. It sets master's repl-diskless-sync-delay to 0, so the
// sync starts at once instead of after Redis's default 5s.
func StartReplica(master *Server, extra ...string) (*Server, error) {
	if _, err := master.Do("CONFIG", "SET", "repl-diskless-sync-delay", "0"); err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	r, err := Start(append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port)}, extra...)...)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := r.Info("replication")
		if err == nil && strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0") {
			return r, nil
		}
		if time.Now().After(deadline) {
			r.Close()
			return nil, fmt.Errorf("redistest: replica not in sync after 20s: %v %s", err, info)
		}
		time.Sleep(10 * time.Millisecond) // polling for readiness
	}
}

// Promote makes a replica a master (REPLICAOF NO ONE), as a failover does.
func (s *Server) Promote() error {
	_, err := s.Do("REPLICAOF", "NO", "ONE")
	return err
}

// Info returns the server's INFO section as text.
func (s *Server) Info(section string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n", len(section), section); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(line, "$") {
		return "", fmt.Errorf("redistest: INFO replied %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return "", err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	s.kill()
	return os.RemoveAll(s.dir)
}

// Cluster is a Redis Cluster of masters without replicas.
type Cluster struct {
	// Nodes are the masters.
	Nodes []*Server
}

// Addrs returns the masters' addresses.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		a[i] = n.Addr
	}
	return a
}

// Close stops every node.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
}

// StartCluster starts n cluster-enabled servers, joins them with
// redis-cli --cluster create, and waits until every node reports
// cluster_state:ok.
func StartCluster(n int) (*Cluster, error) {
	if err := Binaries("redis-server", "redis-cli"); err != nil {
		return nil, err
	}
	c := &Cluster{}
	for range n {
		s, err := Start("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %w: %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range c.Nodes {
		for {
			info, err := s.info("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				return nil, fmt.Errorf("redistest: cluster not ok after 20s: %v %s", err, info)
			}
			time.Sleep(20 * time.Millisecond) // polling for readiness
		}
	}
	return c, nil
}

// info runs a command returning a bulk string via redis-cli.
func (s *Server) info(args ...string) (string, error) {
	out, err := exec.Command("redis-cli", append([]string{"-p", strconv.Itoa(s.Port)}, args...)...).CombinedOutput()
	return string(out), err
}

// Stop freezes the server (SIGSTOP): connections stay open and nothing
// answers, as with a hung or partitioned server. Cont undoes it.
func (s *Server) Stop() error { return testproc.Stop(s.cmd.Process.Pid) }

// Cont continues a frozen server (SIGCONT).
func (s *Server) Cont() error { return testproc.Continue(s.cmd.Process.Pid) }

var _ testserver.Server = (*Server)(nil)
