package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ontopix/sluice/history"
	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
	"github.com/ontopix/sluice/service/gen/sluice/v1/sluicev1connect"
	"github.com/ontopix/sluice/store/allstores"
)

// freeAddr returns a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// serveLimits has one concurrent dimension of 2 slots.
const serveLimits = `dimensions:
  v#slots:
    type: concurrent
    capacity: 2
`

// TestServe runs sluice serve on Redis from a limits file: a gRPC client
// takes a slot, /healthz, /readyz and /metrics answer, and SIGTERM (the
// context's end) releases the slot the server still held.
func TestServe(t *testing.T) {
	e := redisEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.yaml")
	if err := os.WriteFile(file, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, e, "--limits", file, "--reconcile", "1s")
	base := "http://" + srv.addr
	waitHealthy(t, base+"/healthz", srv.done)

	c := sluicev1connect.NewLimiterServiceClient(h2cClient(), base, connect.WithGRPC())
	res, err := c.Acquire(context.Background(), connect.NewRequest(&sluicev1.AcquireRequest{Items: []*sluicev1.Item{{Dimension: "v#slots", Cost: 1}}}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Msg.GetGranted() {
		t.Fatalf("got %v, want a slot", res.Msg)
	}
	for _, tt := range []struct{ path, want string }{
		{"/readyz", "ok"},
		{"/metrics", `sluice_acquire_total{dimension="v#slots",outcome="granted"} 1`},
		{"/metrics", `sluice_bucket_leases{dimension="v#slots"} 1`}, // the state gauges
	} {
		if got := get(t, base+tt.path); !strings.Contains(got, tt.want) {
			t.Errorf("%s: got %q, want it to contain %q", tt.path, got, tt.want)
		}
	}
	r := srv.stop()
	if r.code != 0 {
		t.Fatalf("serve exited %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.errs)
	}
	if !strings.Contains(r.errs, `"msg":"serve.shutdown","held":1`) {
		t.Errorf("stderr does not log the shutdown with one lease held:\n%s", r.errs)
	}
	out := e.ok("status", "-o", "json")
	if !strings.Contains(out, `"tokens": 2`) && !strings.Contains(out, `"tokens":2`) {
		t.Errorf("after shutdown the slot is not free:\n%s", out)
	}
}

// TestServeRefusesNonLoopback checks the refusals that come before the
// server starts: each is a usage error (exit 2) naming the flag.
func TestServeRefusesNonLoopback(t *testing.T) {
	e := memEnv(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:7070"}, `invalid --listen "0.0.0.0:7070"`},
		{[]string{"--listen", "192.0.2.1:7070"}, "loopback"},
		{[]string{"--listen", "nohostport"}, `invalid --listen "nohostport"`},
		{[]string{"--drain", "0s"}, "invalid --drain"},
		{[]string{"--max-leases", "0"}, "invalid --max-leases 0"},
		{[]string{"--max-request-bytes", "10"}, "invalid --max-request-bytes 10"},
		{[]string{"--reconcile", "-1s"}, "invalid --reconcile"},
		{[]string{"--limits", "/nonexistent/limits.yaml"}, "/nonexistent/limits.yaml"},
		{[]string{"--envoy", "/nonexistent/envoy.yaml"}, "invalid --envoy"},
		{[]string{"--auth", "/nonexistent/auth.yaml"}, "invalid --auth"},
		{[]string{"--tls-cert", "c.pem"}, "invalid --tls-cert/--tls-key: give both"},
		{[]string{"--client-ca", "ca.pem"}, "client certificates need TLS"},
		{[]string{"--auth", "testdata/serve-auth-cert.yaml"}, "give --client-ca"},
	}
	for _, tt := range tests {
		_, errs, code := e.run(append([]string{"serve"}, tt.args...)...)
		if code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("serve %v: got exit %d, %q; want exit 2 naming %q", tt.args, code, errs, tt.want)
		}
	}
}

// serveResult is how a run of sluice serve ended.
type serveResult struct {
	out, errs string
	code      int
}

// waitHealthy polls url until it answers 200, failing the test when the
// command exits first or after 10 s.
func waitHealthy(t *testing.T, url string, done chan serveResult) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case r := <-done:
			done <- r // for the server's stop
			t.Fatalf("serve exited %d before it was healthy\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.errs)
		default:
		}
		if resp, err := http.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within 10 s", url)
}

// h2cClient speaks HTTP/2 without TLS, as gRPC clients of a loopback
// server do.
func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestServeEnvoy serves Envoy's rate limit service next to the API: a
// gRPC client generated from Envoy's own definition spends the slots.
func TestServeEnvoy(t *testing.T) {
	e := redisEnv(t)
	dir := t.TempDir()
	file, envoy := filepath.Join(dir, "limits.yaml"), filepath.Join(dir, "envoy.yaml")
	if err := os.WriteFile(file, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(envoy, []byte("domain: llm\nrules:\n  - entries: [generic_key=slots]\n    dimension: v#slots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, e, "--limits", file, "--envoy", envoy)
	addr, done := srv.addr, srv.done
	waitHealthy(t, "http://"+addr+"/healthz", done)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rls := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "slots"}}}}}
	// Without a correlation key every call stands alone: a slot is a
	// check, released at once, so every call is OK.
	for i := range 3 {
		res, err := rls.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := res.GetOverallCode(), rlsv3.RateLimitResponse_OK; got != want {
			t.Fatalf("call %d: got %v, want %v", i, got, want)
		}
	}
}

// TestCheckLoopback: any address with authentication, loopback only
// without.
func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		addr   string
		authed bool
		ok     bool
	}{
		{"127.0.0.1:7070", false, true},
		{"[::1]:7070", false, true},
		{"localhost:7070", false, true},
		{"0.0.0.0:7070", false, false},
		{":7070", false, false},
		{"10.1.2.3:7070", false, false},
		{"0.0.0.0:7070", true, true},
		{":7070", true, true},
	}
	for _, tt := range tests {
		if err := checkLoopback(tt.addr, tt.authed); (err == nil) != tt.ok {
			t.Errorf("checkLoopback(%q, %v): got %v, want ok %v", tt.addr, tt.authed, err, tt.ok)
		}
	}
}

// TestServeAuth runs serve with an authentication file: the API and
// /metrics refuse a call without a token, and serve the principal's;
// /metrics, which shows every dimension, needs read on all of them.
func TestServeAuth(t *testing.T) {
	e := redisEnv(t)
	dir := t.TempDir()
	file, authFile := filepath.Join(dir, "limits.yaml"), filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(file, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	out := e.ok("serve", "token", "--name", "ops", "--verbs", "acquire,read", "--dimensions", "v#*")
	token := strings.TrimSpace(strings.SplitN(strings.SplitN(out, "): ", 2)[1], "\n", 2)[0])
	entry := out[strings.Index(out, "principals:"):]
	// A scraper sees every dimension: /metrics needs read on all ("*").
	out = e.ok("serve", "token", "--name", "scraper", "--verbs", "read", "--dimensions", "*")
	scraper := strings.TrimSpace(strings.SplitN(strings.SplitN(out, "): ", 2)[1], "\n", 2)[0])
	entry += out[strings.Index(out, "principals:\n")+len("principals:\n"):]
	// An administrator of some dimensions only.
	out = e.ok("serve", "token", "--name", "team-admin", "--verbs", "admin", "--dimensions", "v#*")
	teamAdmin := strings.TrimSpace(strings.SplitN(strings.SplitN(out, "): ", 2)[1], "\n", 2)[0])
	entry += out[strings.Index(out, "principals:\n")+len("principals:\n"):]
	if err := os.WriteFile(authFile, []byte(entry), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, e, "--limits", file, "--auth", authFile)
	addr, done := srv.addr, srv.done
	base := "http://" + addr
	waitHealthy(t, base+"/healthz", done)
	metrics := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got, want := metrics(""), http.StatusUnauthorized; got != want {
		t.Errorf("/metrics without a token: got %d, want %d", got, want)
	}
	if got, want := metrics(token), http.StatusForbidden; got != want {
		t.Errorf("/metrics with a token for v#* only: got %d, want %d", got, want)
	}
	if got, want := metrics(scraper), http.StatusOK; got != want {
		t.Errorf("/metrics with read on every dimension: got %d, want %d", got, want)
	}
	c := sluicev1connect.NewLimiterServiceClient(http.DefaultClient, base)
	req := connect.NewRequest(&sluicev1.AcquireRequest{Items: []*sluicev1.Item{{Dimension: "v#slots", Cost: 1}}})
	if _, err := c.Acquire(context.Background(), req); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("acquire without a token: got %v, want unauthenticated", err)
	}
	req.Header().Set("Authorization", "Bearer "+token)
	if res, err := c.Acquire(context.Background(), req); err != nil || !res.Msg.GetGranted() {
		t.Errorf("acquire with the token: got %v, %v", res, err)
	}
	// The store door is raw store access: the admin verb only.
	_, errs, code := (&testEnv{t: t, url: "sluice://" + addr, env: map[string]string{"SLUICE_TOKEN": token}}).run("bucket", "list")
	if code != 1 || !strings.Contains(errs, "admin verb") {
		t.Errorf("the store door without the admin verb: got exit %d, %q; want 1 naming the admin verb", code, errs)
	}
	// It reaches every bucket, so the admin verb on some dimensions is
	// not enough: a team's administrator cannot delete another's bucket.
	_, errs, code = (&testEnv{t: t, url: "sluice://" + addr, env: map[string]string{"SLUICE_TOKEN": teamAdmin}}).run("bucket", "delete", "w#rpm")
	if code != 1 || !strings.Contains(errs, "admin verb on every dimension") {
		t.Errorf("the store door with the admin verb on v#* only: got exit %d, %q; want 1 naming the admin verb on every dimension", code, errs)
	}
}

// TestServeStoreDoor runs serve on Redis, then other sluice commands
// through its store door (sluice://): they see and change the same
// buckets as a process on Redis does.
func TestServeStoreDoor(t *testing.T) {
	e := redisEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.yaml")
	if err := os.WriteFile(file, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, e, "--limits", file)
	addr, done := srv.addr, srv.done
	waitHealthy(t, "http://"+addr+"/healthz", done)
	remote := &testEnv{t: t, url: "sluice://" + addr}
	if out := remote.ok("acquire", "v#slots", "--hold", "0s"); !strings.Contains(out, "GRANTED") {
		t.Errorf("acquire through the door: %s", out)
	}
	if out := remote.ok("bucket", "list"); !strings.Contains(out, "v#slots") {
		t.Errorf("bucket list through the door: %s", out)
	}
	if out := e.ok("bucket", "list"); !strings.Contains(out, "v#slots") {
		t.Errorf("bucket list on Redis: %s", out)
	}
	_, errs, code := (&testEnv{t: t, url: "sluice://" + freeAddr(t)}).run("bucket", "list")
	if code != 3 {
		t.Errorf("no server behind sluice://: got exit %d (%s), want 3 (unavailable)", code, errs)
	}
}

// server is a run of sluice serve started by startServe.
type server struct {
	addr string
	done chan serveResult
	stop func() serveResult
}

// startServe runs sluice serve on a free loopback address with args. Its
// stop ends it as SIGTERM would and returns how it exited; the test's
// cleanup stops it too and checks that it exited 0.
func startServe(t *testing.T, e *testEnv, args ...string) *server {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan serveResult, 1)
	go func() {
		out, errs, code := e.runCtx(ctx, append([]string{"serve", "--listen", addr}, args...)...)
		done <- serveResult{out, errs, code}
	}()
	stop := sync.OnceValue(func() serveResult {
		cancel()
		select {
		case r := <-done:
			return r
		case <-time.After(time.Minute):
			return serveResult{errs: "serve did not stop within a minute", code: -1}
		}
	})
	t.Cleanup(func() {
		if r := stop(); r.code != 0 {
			t.Errorf("serve exited %d\nstderr:\n%s", r.code, r.errs)
		}
	})
	return &server{addr: addr, done: done, stop: stop}
}

// TestServeDrainsWaits stops serve while a caller waits on the server for
// a slot: the wait in flight still gets its answer before the server
// exits, and the slots the server held are released after it.
func TestServeDrainsWaits(t *testing.T) {
	e := redisEnv(t)
	file := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(file, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, e, "--limits", file, "--drain", "10s")
	addr := srv.addr
	waitHealthy(t, "http://"+addr+"/healthz", srv.done)
	c := sluicev1connect.NewLimiterServiceClient(http.DefaultClient, "http://"+addr)
	for range 2 {
		if _, err := c.Acquire(context.Background(), connect.NewRequest(&sluicev1.AcquireRequest{Items: []*sluicev1.Item{{Dimension: "v#slots", Cost: 1}}})); err != nil {
			t.Fatal(err)
		}
	}
	waited := make(chan error, 1)
	go func() {
		res, err := c.Wait(context.Background(), connect.NewRequest(&sluicev1.WaitRequest{Items: []*sluicev1.Item{{Dimension: "v#slots", Cost: 1}}, MaxWait: durationpb.New(time.Second)}))
		if err == nil && res.Msg.GetGranted() {
			err = fmt.Errorf("granted a slot that is held")
		}
		waited <- err
	}()
	time.Sleep(200 * time.Millisecond) // the wait is in flight
	r := srv.stop()
	if err := <-waited; err != nil {
		t.Errorf("the wait in flight at shutdown: %v, want its answer (no slot within 1 s)", err)
	}
	if r.code != 0 {
		t.Fatalf("serve exited %d\nstderr:\n%s", r.code, r.errs)
	}
	if out := e.ok("status", "-o", "json"); !strings.Contains(out, `"tokens": 2`) {
		t.Errorf("after shutdown the held slots are not free:\n%s", out)
	}
	// The usage history in the store counts the wait that ended during the
	// drain: the recorder's last flush comes after it.
	st, err := allstores.Open(context.Background(), e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reader, err := history.New(st)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	pts, err := reader.Query(context.Background(), history.Query{Dimension: "v#slots", From: now.Add(-time.Hour).Truncate(time.Hour), To: now.Add(time.Hour), Step: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var got history.Counts
	for _, p := range pts {
		got.Grants += p.Counts.Grants
		got.Waits += p.Counts.Waits
	}
	if got.Grants != 2 || got.Waits != 1 {
		t.Errorf("usage history after shutdown: %d grants and %d waits, want 2 and the wait that ended in the drain\nstderr:\n%s", got.Grants, got.Waits, r.errs)
	}
}

// TestServeClosesIdleConnections keeps a connection open after one call:
// the server closes it once it has been idle for --idle-timeout, so that
// connections nobody uses do not pile up.
func TestServeClosesIdleConnections(t *testing.T) {
	e := memEnv(t)
	srv := startServe(t, e, "--idle-timeout", "300ms")
	base := "http://" + srv.addr
	waitHealthy(t, base+"/healthz", srv.done)
	conn, err := net.Dial("tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: sluice\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := br.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("idle connection: read %d bytes, %v; want the server to close it (EOF)", n, err)
	}
}

// TestServeEndsStreamsAtShutdown keeps a Watch stream and the store
// door's freed-slot stream open as the server shuts down: both end at
// once, so that the drain does not wait its whole --drain for streams
// that never finish, and the server exits soon after.
func TestServeEndsStreamsAtShutdown(t *testing.T) {
	e := redisEnv(t)
	file := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(file, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, e, "--limits", file, "--drain", "40s")
	base := "http://" + srv.addr
	waitHealthy(t, base+"/healthz", srv.done)
	c := sluicev1connect.NewLimiterServiceClient(http.DefaultClient, base)
	watch, err := c.Watch(context.Background(), connect.NewRequest(&sluicev1.WatchRequest{Dimensions: []string{"v#slots"}}))
	if err != nil {
		t.Fatal(err)
	}
	if !watch.Receive() {
		t.Fatalf("no first reading: %v", watch.Err())
	}
	freed, err := http.Get(base + "/sluice.store.v1/WatchFreed")
	if err != nil {
		t.Fatal(err)
	}
	defer freed.Body.Close()
	if freed.StatusCode != http.StatusOK {
		t.Fatalf("WatchFreed: %s", freed.Status)
	}
	start := time.Now()
	r := srv.stop()
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("serve took %s to stop with two streams open, as long as the drain (40s) allows", took)
	}
	if r.code != 0 {
		t.Fatalf("serve exited %d\nstderr:\n%s", r.code, r.errs)
	}
	for watch.Receive() {
	}
	if _, err := io.Copy(io.Discard, freed.Body); err != nil {
		t.Logf("freed-slot stream: %v", err)
	}
}
