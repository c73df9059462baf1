package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/cmd/clikit"
)

const example = "../../../docs/examples/limits.yaml"

// TestLimits runs limits apply/diff end to end on every store.
func TestLimits(t *testing.T) { stores(t, testLimits) }

// testLimits applies the example, drains a bucket, changes the file and
// re-applies: the live balance survives unless --reset.
func testLimits(t *testing.T, e *testEnv) {
	out := e.ok("limits", "apply", "-f", example)
	if strings.Count(out, "create ") != 8 || !strings.Contains(out, "create openai#gpt-4o#tpm: 30000/1m1.225s burst 29400 tokens") {
		t.Fatalf("first apply:\n%s", out)
	}
	if out := e.ok("limits", "apply", "-f", example); !strings.Contains(out, "nothing to change") {
		t.Errorf("second apply:\n%s", out)
	}
	if out := e.ok("limits", "diff", "-f", example, "--exit-code"); out != "no differences\n" {
		t.Errorf("diff:\n%s", out)
	}
	drained := time.Now()
	e.ok("acquire", "anthropic#input_tpm:39200") // the preset's capacity: 40000 less 2 % headroom
	e.ok("bucket", "put", "extra#rpm", "--type", "requests", "--capacity", "1")

	changed := filepath.Join(t.TempDir(), "limits.yaml")
	b, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changed, []byte(strings.Replace(string(b), "    input_tpm: 40_000\n", "    input_tpm: 50_000\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := e.run("limits", "diff", "-f", changed, "--exit-code")
	if code != clikit.ExitError || !strings.Contains(out, "~ anthropic#input_tpm\n-     capacity: 39200\n+     capacity: 49000\n") || !strings.Contains(out, "- extra#rpm (in the store, not in the file)") {
		t.Errorf("diff after change: exit %d\n%s", code, out)
	}
	out = e.ok("limits", "apply", "-f", changed)
	if !strings.Contains(out, "update anthropic#input_tpm: capacity 39200 -> 49000, refill 40000 -> 50000, max_debt 39200 -> 49000") {
		t.Errorf("apply change:\n%s", out)
	}
	// The summary counts what was applied (after any re-plan), not what
	// the first plan said.
	if !strings.HasSuffix(out, "Applied: 0 created, 1 updated, 0 reset, 0 deleted.\n") {
		t.Errorf("apply change's summary:\n%s", out)
	}
	var s bucketView
	// The commands run on the wall clock, so the drained bucket refills
	// while they run: at most 50000 per 61.225 s (the new rate) since it
	// was drained, plus one token of rounding, measured once the balance
	// was read (the read itself takes time on a loaded machine). A reset
	// would show 49000.
	got := e.ok("bucket", "get", "anthropic#input_tpm", "-o", "json")
	refilled := time.Since(drained).Seconds()*50_000/61.225 + 1
	if err := json.Unmarshal([]byte(got), &s); err != nil || s.Capacity != 49_000 || s.Tokens > refilled {
		t.Errorf("the live balance was not kept: %v %+v (at most %.3f tokens could have refilled)", err, s, refilled)
	}
	out = e.ok("limits", "apply", "-f", changed, "--reset", "--prune", "-o", "json")
	var applied struct {
		Applied []struct{ Action, Dimension string }
	}
	if err := json.Unmarshal([]byte(out), &applied); err != nil || len(applied.Applied) != 9 {
		t.Errorf("apply --reset --prune: %v\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(e.ok("bucket", "get", "anthropic#input_tpm", "-o", "json")), &s); err != nil || s.Tokens != 49_000 {
		t.Errorf("--reset did not refill: %v %+v", err, s)
	}
	if _, errs, code := e.run("bucket", "get", "extra#rpm"); code != clikit.ExitError || !strings.Contains(errs, "unknown dimension") {
		t.Errorf("--prune kept extra#rpm: %d %s", code, errs)
	}
}

// TestGoldenLimitsPlan checks plan and diff against the same golden files
// on every store: what a plan says must not depend on the store.
func TestGoldenLimitsPlan(t *testing.T) { stores(t, testGoldenLimitsPlan) }

func testGoldenLimitsPlan(t *testing.T, e *testEnv) {
	// A deployment that applied the presets before they were built from
	// the vendor profiles: capacity a minute's worth. The plan shows each
	// bucket's move to the profile's capacity and stretched period.
	e.ok("bucket", "put", "anthropic#rpm", "--type", "requests", "--capacity", "40", "--per", "1m")
	e.ok("bucket", "put", "openai#gpt-4o#rpm", "--type", "requests", "--capacity", "500", "--per", "1m")
	e.ok("bucket", "put", "elevenlabs#concurrent", "--type", "concurrent", "--capacity", "5")
	e.ok("bucket", "put", "legacy#rpm", "--type", "requests", "--capacity", "10", "--per", "1s")
	golden(t, "limits_plan.txt", e.ok("limits", "plan", "-f", example))
	golden(t, "limits_plan.json", e.ok("limits", "plan", "-f", example, "--output", "json"))
	golden(t, "limits_diff.txt", e.ok("limits", "diff", "-f", example))
}

// limits plan warns about a vendor whose presets leave models unmetered:
// the example's OpenAI preset covers gpt-4o only.
func TestLimitsPlanWarnsUnmetered(t *testing.T) {
	_, errs, code := memEnv(t).run("limits", "plan", "-f", example)
	if code != 0 || !strings.Contains(errs, "warning: openai: presets cover only gpt-4o") || strings.Contains(errs, "anthropic:") {
		t.Errorf("exit %d, stderr:\n%s", code, errs)
	}
}

func TestLimitsInvalid(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("dimensions:\n  a#b:\n    type: requests\n    capacity: 0\n    per: 1m\n  c#d:\n    type: concurent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code := memEnv(t).run("limits", "plan", "-f", bad)
	if code != clikit.ExitError || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, bad+":4:15: dimensions[\"a#b\"].capacity: 0: must be between 1") ||
		!strings.Contains(errs, bad+":7:11: dimensions[\"c#d\"].type") {
		t.Errorf("exit %d: %s", code, errs)
	}
	if _, errs, code := memEnv(t).run("limits", "apply"); code != clikit.ExitUsage || !strings.Contains(errs, "-f FILE") {
		t.Errorf("no -f: exit %d %s", code, errs)
	}
}
