package cli

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/store/memstore"
)

const ephemeral = "ran on memory://, which lives in this process only"

// Every stateful command run on a process-local memory:// store (the
// default, with no --store or SLUICE_STORE) warns that nothing persists,
// whether it succeeded or failed on a bucket an earlier command made;
// read-only commands and a store shared by the Env do not warn.
func TestStatefulWarnsOnMemory(t *testing.T) {
	lim := writeLimits(t)
	tests := []struct {
		args []string
		warn bool
	}{
		{[]string{"limits", "apply", "-f", lim}, true},
		{[]string{"bucket", "put", "x#rpm", "--type", "requests", "--capacity", "5"}, true},
		{[]string{"bucket", "delete", "x#rpm"}, true},
		{[]string{"bucket", "reset", "x#rpm"}, true},
		{[]string{"acquire", "x#rpm"}, true},
		{[]string{"release", "00000000-0000-4000-8000-000000000001"}, true},
		{[]string{"penalize", "x#rpm"}, true},
		{[]string{"cooldown", "x#rpm", "--for", "1s"}, true},
		{[]string{"sync", "x#rpm", "--remaining", "1"}, true},
		{[]string{"reconcile"}, true},
		{[]string{"status"}, false},
		{[]string{"bucket", "list"}, false},
		{[]string{"leases", "list"}, false},
		{[]string{"limits", "plan", "-f", lim}, false},
		// A usage error is the command line's fault: no warning.
		{[]string{"penalize", "x#rpm", "--factor", "2"}, false},
		{[]string{"cooldown", "x#rpm", "--for", "25h"}, false},
		{[]string{"sync", "x#rpm", "--remaining", "-1"}, false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[:min(2, len(tt.args))], " "), func(t *testing.T) {
			e := &testEnv{t: t} // no SLUICE_STORE: the default memory://
			_, errs, _ := e.run(tt.args...)
			if got := strings.Contains(errs, ephemeral); got != tt.warn {
				t.Errorf("%v: warned %v, want %v; stderr:\n%s", tt.args, got, tt.warn, errs)
			}
			shared := &testEnv{t: t, url: "memory://", mem: memstore.New()}
			if _, errs, _ := shared.run(tt.args...); strings.Contains(errs, ephemeral) {
				t.Errorf("%v on a shared store: warned; stderr:\n%s", tt.args, errs)
			}
		})
	}
}

// An argument whose cost after the last ':' is not a whole number of at
// least 1 is a usage error, not a dimension name.
func TestAcquireBadCost(t *testing.T) {
	e := memEnv(t)
	e.ok("bucket", "put", "dim", "--type", "requests", "--capacity", "5")
	for _, arg := range []string{"dim:abc", "dim:0", "dim:-1", "dim:", "dim:1.5", "dim:+"} {
		if _, errs, code := e.run("acquire", arg); code != clikit.ExitUsage || !strings.Contains(errs, "the cost after ':'") {
			t.Errorf("acquire %q: exit %d, stderr %q; want exit %d naming the cost", arg, code, errs, clikit.ExitUsage)
		}
	}
	if out := e.ok("acquire", "dim:2", "-o", "json"); !strings.Contains(out, `"cost": 2`) {
		t.Errorf("acquire dim:2:\n%s", out)
	}
}

// bucket put on an existing bucket changes only the flags given, and says
// whether it created or updated the bucket.
func TestBucketPutPartial(t *testing.T) { stores(t, testBucketPutPartial) }

func testBucketPutPartial(t *testing.T, e *testEnv) {
	out := e.ok("bucket", "put", "v#tpm", "--type", "tokens", "--capacity", "100", "--refill", "60", "--per", "1s",
		"--cost", "7", "--max-debt", "-1")
	if want := "put v#tpm: 60/1s burst 100 tokens (created, full)\n"; out != want {
		t.Errorf("create: got %q, want %q", out, want)
	}
	out = e.ok("bucket", "put", "v#tpm", "--capacity", "80")
	if want := "put v#tpm: 60/1s burst 80 tokens (updated, keeping its balance)\n"; out != want {
		t.Errorf("update: got %q, want %q", out, want)
	}
	var got bucketView
	if err := json.Unmarshal([]byte(e.ok("bucket", "get", "v#tpm", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	// max_debt shows the debt in effect: 0 for --max-debt -1 (none); the
	// default would show the capacity.
	want := bucketView{Dimension: "v#tpm", Type: "tokens", Capacity: 80, RefillAmount: 60, CostPerCall: 7, MaxDebt: 0}
	if got.Dimension != want.Dimension || got.Type != want.Type || got.Capacity != want.Capacity ||
		got.RefillAmount != want.RefillAmount || got.RefillPeriod.D() != time.Second || got.CostPerCall != want.CostPerCall ||
		got.MaxDebt != want.MaxDebt {
		t.Errorf("after put --capacity 80: got %+v, want %+v with a 1s period", got, want)
	}
	if out := e.ok("bucket", "put", "v#tpm", "--reset"); !strings.Contains(out, "(updated, refilled)") {
		t.Errorf("put --reset: %q", out)
	}
	if out := e.ok("bucket", "put", "v#conc", "--type", "concurrent", "--capacity", "3"); out != "put v#conc: 3 concurrent (created, full)\n" {
		t.Errorf("concurrent: %q", out)
	}
	if _, errs, code := e.run("bucket", "put", "v#new", "--capacity", "3"); code != clikit.ExitUsage || !strings.Contains(errs, "needs --type and --capacity") {
		t.Errorf("new bucket without --type: exit %d %q", code, errs)
	}
	if _, errs, code := e.run("bucket", "put", "v#conc", "--per", "1m"); code != clikit.ExitUsage || !strings.Contains(errs, "--per and --refill") {
		t.Errorf("--per on a concurrent bucket: exit %d %q", code, errs)
	}
}

// limits apply names a concurrent limit's type once.
func TestLimitsApplyConcurrentOnce(t *testing.T) {
	out := memEnv(t).ok("limits", "apply", "-f", example)
	if strings.Contains(out, "concurrent concurrent") || !strings.Contains(out, "create elevenlabs#concurrent: 5 concurrent\n") {
		t.Errorf("apply:\n%s", out)
	}
}

// status --watch --output json writes one JSON object per line.
func TestStatusWatchNDJSON(t *testing.T) {
	e := memEnv(t)
	e.ok("bucket", "put", "v#rpm", "--type", "requests", "--capacity", "5")
	out := e.ok("status", "--watch", "--interval", "100ms", "--count", "2", "-o", "json")
	sc := bufio.NewScanner(strings.NewReader(out))
	n := 0
	for sc.Scan() {
		n++
		var l statusLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || len(l.Buckets) != 1 || l.Buckets[0].Dimension != "v#rpm" || l.At.IsZero() {
			t.Errorf("line %d = %s: %v", n, sc.Text(), err)
		}
	}
	if n != 2 {
		t.Errorf("got %d lines, want 2:\n%s", n, out)
	}
}

// SLUICE_LOG_LEVEL=debug makes every command that opens a store log to
// stderr as JSON.
func TestLogLevelDebug(t *testing.T) {
	lim := writeLimits(t)
	for _, args := range [][]string{
		{"status"}, {"bucket", "list"}, {"leases", "list"}, {"limits", "apply", "-f", lim}, {"acquire", "openai#rpm"},
		{"penalize", "openai#rpm"}, {"cooldown", "openai#rpm", "--for", "1s"}, {"sync", "openai#rpm", "--remaining", "1"}, {"reconcile"},
	} {
		e := memEnv(t)
		e.env = map[string]string{"SLUICE_LOG_LEVEL": "debug"}
		e.ok("limits", "apply", "-f", lim)
		_, errs, code := e.run(args...)
		if code != clikit.ExitOK || !strings.Contains(errs, `"level":"DEBUG","msg":"cli.store.opened"`) {
			t.Errorf("%v: exit %d, no debug log on stderr:\n%s", args, code, errs)
		}
	}
	e := memEnv(t)
	if _, errs, _ := e.run("status"); strings.Contains(errs, "DEBUG") {
		t.Errorf("status at the default level logged debug:\n%s", errs)
	}
}
