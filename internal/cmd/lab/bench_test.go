package lab

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ontopix/sluice/internal/cmd/benchrun"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// overAdmitting is a deliberately broken store: every third denial it
// grants anyway, without debiting anything.
type overAdmitting struct {
	contract.Forward
	n atomic.Int64
}

func (s *overAdmitting) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	if err := s.Store.Acquire(ctx, req, res); err != nil || res.Granted {
		return err
	}
	if s.n.Add(1)%3 == 1 {
		res.Granted, res.RetryIn, res.ExpiresAt = true, 0, req.Now.Add(req.TTL)
	}
	return nil
}

// benchLimits declares the bench's buckets one by one: a vendor preset's
// requests bucket holds one second's worth, and the bench wants a
// minute's burst to measure the store before the limit.
const benchLimits = "dimensions:\n  openai#rpm:\n    type: requests\n    capacity: 600\n    per: 1m\n  openai#tpm:\n    type: tokens\n    capacity: 60000\n    per: 1m\n  elevenlabs#concurrent:\n    type: concurrent\n    capacity: 3\n"

func writeLimits(t *testing.T) string {
	p := t.TempDir() + "/limits.yaml"
	if err := os.WriteFile(p, []byte(benchLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func benchJSON(t *testing.T, out string) benchrun.Report {
	t.Helper()
	var r benchrun.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return r
}

func TestBenchMemory(t *testing.T) {
	e := &testEnv{t: t, url: "memory://", mem: memstore.New()}
	lim := writeLimits(t)
	out := e.ok("bench", "--limits", lim, "--processes", "1", "--workers", "4", "--duration", "400ms",
		"--dimension", "openai#rpm", "--dimension", "openai#tpm:50", "-o", "json")
	r := benchJSON(t, out)
	if !r.OK || r.Granted < 600 || len(r.Verdict.Dimensions) != 2 || r.Verdict.Dimensions[0].Grants != int(r.Granted) {
		t.Errorf("%+v", r)
	}
	out = e.ok("bench", "--processes", "1", "--workers", "6", "--duration", "300ms", "--dimension", "elevenlabs#concurrent", "--hold", "5ms")
	if !strings.Contains(out, "verdict: no limit exceeded") || !strings.Contains(out, "elevenlabs#concurrent") {
		t.Errorf("concurrent:\n%s", out)
	}
	if _, errs, code := e.run("bench", "--processes", "2", "--dimension", "openai#rpm"); code != clikit.ExitUsage || !strings.Contains(errs, "--processes 1") {
		t.Errorf("memory with 2 processes: %d %s", code, errs)
	}
}

// TestBenchCatchesOverAdmission runs bench on a store that grants what it
// should deny: the verdict must fail, on a time-based and a concurrent
// dimension.
func TestBenchCatchesOverAdmission(t *testing.T) {
	lim := writeLimits(t)
	for _, c := range []struct {
		dims []string
		want string
	}{
		{[]string{"--dimension", "openai#rpm"}, "openai#rpm by"},
		{[]string{"--dimension", "elevenlabs#concurrent", "--hold", "5ms"}, "elevenlabs#concurrent by"},
	} {
		e := &testEnv{t: t, url: "memory://"}
		broken := &overAdmitting{Forward: contract.Forward{Store: memstore.New()}}
		out, errs, code := runWith(t, e, broken, append([]string{"bench", "--limits", lim, "--processes", "1", "--workers", "8",
			"--duration", "300ms"}, c.dims...)...)
		if code != clikit.ExitError || !strings.Contains(out, "EXCEEDED") || !strings.Contains(errs, "limit exceeded: "+c.want) {
			t.Errorf("%v: exit %d\n%s\n%s", c.dims, code, out, errs)
		}
	}
}

// TestBenchRedis runs two child processes (this test binary, re-run) on the
// real redis-server.
func TestBenchRedis(t *testing.T) {
	t.Setenv(childEnv, "1")
	e := redisEnv(t)
	out := e.ok("bench", "--limits", writeLimits(t), "--processes", "2", "--workers", "3", "--duration", "500ms",
		"--dimension", "openai#rpm", "--dimension", "openai#tpm:20", "-o", "json")
	r := benchJSON(t, out)
	if !r.OK || r.Processes != 2 || r.Granted < 600 || r.Errors != 0 || r.Slack != 0 {
		t.Errorf("%+v", r)
	}
	out = e.ok("bench", "--processes", "2", "--workers", "3", "--duration", "400ms", "--dimension", "elevenlabs#concurrent", "--hold", "5ms")
	if !strings.Contains(out, "verdict: no limit exceeded") {
		t.Errorf("concurrent:\n%s", out)
	}
}

// TestBenchPostgres runs a short two-process bench on PostgreSQL, whose
// server clock makes the children's grant times comparable. (DynamoDB Local
// is too slow on a shared machine for a bench this short to grant reliably:
// its child processes' first calls alone can outlast it.)
func TestBenchPostgres(t *testing.T) {
	t.Setenv(childEnv, "1")
	e := pgEnv(t)
	out := e.ok("bench", "--limits", writeLimits(t), "--processes", "2", "--workers", "2", "--duration", "400ms",
		"--dimension", "openai#rpm", "--dimension", "openai#tpm:20", "-o", "json")
	r := benchJSON(t, out)
	// How many it grants in 400 ms is the machine's speed, a benchmark
	// figure: a loaded machine granted 37 where this once asked for 50.
	if !r.OK || r.Processes != 2 || r.Granted == 0 || r.Errors != 0 || r.Slack != 0 {
		t.Errorf("%+v", r)
	}
	out = e.ok("bench", "--processes", "2", "--workers", "2", "--duration", "300ms", "--dimension", "elevenlabs#concurrent", "--hold", "5ms")
	if !strings.Contains(out, "verdict: no limit exceeded") {
		t.Errorf("concurrent:\n%s", out)
	}
}
