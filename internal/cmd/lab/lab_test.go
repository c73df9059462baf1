package lab

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/store/memstore"
)

func TestDemo(t *testing.T) {
	out, errs, code := run(t, nil, "demo", "--duration", "1s", "--workers", "8", "--progress", "plain")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	for _, want := range []string{
		"8 workers (5 chat on OpenAI, 3 speech on ElevenLabs)",
		"DIMENSION", "LIMIT", "GRANTED", "RETRY_IN", "PEAK IN-FLIGHT", "UTILISATION", "MAX IN ANY WINDOW", "WORST MARGIN", "VERDICT",
		"openai#tpm settlements:",
		"verdict: no limit exceeded",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, row := range []string{
		`(?m)^openai#rpm\s+600/min\s+\d+\s+\d+\s+\d+ req ≤ \d+ allowed \(capacity 600 \+ 600/min × [\d.]+ s\)\s+-\s+[\d.]+%\s+\d+ req / min\s+[\d.]+ req\s+ok$`,
		`(?m)^openai#tpm\s+60000/min\s+\d+\s+\d+\s+\d+ tok ≤ \d+ allowed \(capacity 60000 \+ 60000/min × [\d.]+ s\)\s+-\s+[\d.]+%\s+\d+ tok / min\s+[\d.]+ tok\s+ok$`,
		`(?m)^elevenlabs#concurrent\s+5 concurrent\s+\d+\s+\d+\s+\d+ slots\s+[1-5]\s+[\d.]+%\s+-\s+\d+ slots\s+ok$`,
	} {
		if !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("no row matching %s in:\n%s", row, out)
		}
	}
	if !strings.Contains(errs, "sluice-lab demo: 8 workers share") || !strings.Contains(errs, "granted: openai") {
		t.Errorf("stderr lacks the banner or progress:\n%s", errs)
	}
}

func TestDemoJSON(t *testing.T) {
	out, errs, code := run(t, nil, "demo", "--duration", "300ms", "--workers", "4", "--progress", "none", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		OK      bool
		Verdict struct {
			Dimensions []struct {
				Name     string
				Exceeded bool
				Grants   int
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !r.OK || len(r.Verdict.Dimensions) != 3 || r.Verdict.Dimensions[0].Name != "openai#rpm" || r.Verdict.Dimensions[0].Grants == 0 {
		t.Fatalf("unexpected report: %+v", r)
	}
}

// bench on memory:// runs in this process without --processes; naming more
// processes is still a usage error.
func TestBenchMemoryDefault(t *testing.T) {
	e := &testEnv{t: t, url: "memory://"}
	out, errs, code := e.run("bench", "--limits", writeLimits(t), "--workers", "2", "--duration", "200ms", "--dimension", "openai#rpm")
	if code != clikit.ExitOK || !strings.Contains(errs, "1 process(es)") || !strings.Contains(out, "verdict: no limit exceeded") {
		t.Errorf("exit %d\n%s\n%s", code, out, errs)
	}
}

// bench warns before draining buckets other callers may use: names
// without "bench" in them, and buckets that hold leases.
func TestBenchWarnsOnSharedBuckets(t *testing.T) {
	ctx := context.Background()
	e := &testEnv{t: t, url: "memory://", mem: memstore.New()} // bench runs on the wall clock
	c, err := sluice.New(e.mem)
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, cfg bucket.Config) {
		t.Helper()
		if err := c.PutBucket(ctx, sluice.Bucket{Name: name, Config: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	put("openai#rpm", bucket.PerPeriod(bucket.Requests, 100, time.Minute))
	put("bench#rpm", bucket.PerPeriod(bucket.Requests, 100, time.Minute))
	put("bench#conc", bucket.ConcurrentSlots(3))
	bench := func(dim string) string {
		_, errs, code := e.run("bench", "--workers", "1", "--duration", "100ms", "--dimension", dim, "--hold", "1ms")
		if code != clikit.ExitOK {
			t.Fatalf("bench %s: exit %d\n%s", dim, code, errs)
		}
		return errs
	}
	if errs := bench("openai#rpm"); !strings.Contains(errs, `warning: bench drains openai#rpm, not named as a benchmark bucket (no "bench" in the name)`) {
		t.Errorf("non-bench name: no warning:\n%s", errs)
	}
	if errs := bench("bench#rpm"); strings.Contains(errs, "warning") {
		t.Errorf("bench name: warned:\n%s", errs)
	}
	put("openai#bench#rpm", bucket.PerPeriod(bucket.Requests, 100, time.Minute))
	if errs := bench("openai#bench#rpm"); strings.Contains(errs, "warning") {
		t.Errorf("bench model name: warned:\n%s", errs)
	}
	if r, err := c.Acquire(ctx, "bench#conc", sluice.WithTTL(time.Minute)); err != nil || !r.Granted() {
		t.Fatalf("acquire bench#conc: %+v, %v", r, err)
	}
	if errs := bench("bench#conc"); !strings.Contains(errs, "hold leases before it starts: bench#conc (1)") {
		t.Errorf("leased bucket: no warning:\n%s", errs)
	}
}

// SLUICE_LOG_LEVEL=debug makes bench log to stderr as JSON, the store it
// opened first.
func TestBenchLogLevelDebug(t *testing.T) {
	e := &testEnv{t: t, url: "memory://", env: map[string]string{"SLUICE_LOG_LEVEL": "debug"}}
	_, errs, code := e.run("bench", "--limits", writeLimits(t), "--duration", "100ms", "--workers", "1", "--dimension", "openai#rpm")
	if code != clikit.ExitOK || !strings.Contains(errs, `"level":"DEBUG","msg":"cli.store.opened"`) {
		t.Errorf("exit %d, no debug log on stderr:\n%s", code, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{nil, []string{"demo", "--bogus"}, "unknown flag: --bogus"},
		{nil, []string{"demo", "--workers", "1"}, "--workers 1"},
		{nil, []string{"demo", "--duration", "soon"}, "invalid argument"},
		{nil, []string{"demo", "--store", "redis://127.0.0.1:6379"}, `demo runs on the memory store only`},
		{map[string]string{"SLUICE_STORE": "ftp://db"}, []string{"demo"}, `scheme "ftp" is not supported`},
		{nil, []string{"bench", "--dimension", "a#b", "--store", "redis://u:secret@127.0.0.1:6379"}, "the URL contains a password"},
		{nil, []string{"vendorsim", "extra"}, "takes no arguments"},
	} {
		out, errs, code := run(t, c.env, c.args...)
		if code != clikit.ExitUsage || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "sluice-lab: ") {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 and one line with %q", c.args, code, errs, out, c.want)
		}
	}
}

// TestVersionFlag: sluice-lab --version prints one line, the version the
// build information gives ("devel" without any).
func TestVersionFlag(t *testing.T) {
	out, errs, code := run(t, nil, "--version")
	if want := "sluice-lab devel\n"; code != 0 || out != want {
		t.Fatalf("sluice-lab --version: exit %d, stdout %q, stderr %q; want exit 0, %q", code, out, errs, want)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {}, {"demo", "--help"}, {"bench", "--help"}, {"vendorsim", "--help"}} {
		out, _, code := run(t, nil, args...)
		if code != 0 || !strings.Contains(out, "Examples:") {
			t.Errorf("%v: exit %d, no examples:\n%s", args, code, out)
		}
	}
}

// The progress line shows the rate over the last interval, not the
// average since the start.
func TestProgressRate(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := rateMeter{start: start, last: start}
	tests := []struct {
		at      time.Duration
		granted int64
		want    string
	}{
		{time.Second, 100, "granted 100 (now 100/s)"},
		{2 * time.Second, 150, "granted 150 (now 50/s)"},
		{4 * time.Second, 150, "granted 150 (now 0/s)"},
	}
	for _, tt := range tests {
		if got := r.line(start.Add(tt.at), progressLine{Granted: tt.granted}, 10*time.Second); !strings.Contains(got, tt.want) {
			t.Errorf("at %s: got %q, want it to contain %q", tt.at, got, tt.want)
		}
	}
}

// bench -o json prints the verdict's configs and its durations in the
// command line's JSON dialect.
func TestBenchJSONDialect(t *testing.T) {
	e := &testEnv{t: t, url: "memory://", mem: memstore.New()}
	out := e.ok("bench", "--limits", writeLimits(t), "--workers", "2", "--duration", "200ms",
		"--dimension", "openai#rpm", "-o", "json")
	for _, want := range []string{`"type": "requests"`, `"refill_period": "1m"`, `"cost_per_call": 1`, `"elapsed": "`, `"p50": "`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in:\n%s", want, out)
		}
	}
	for _, bad := range []string{`"Type"`, `"Capacity"`, `"RefillPeriod"`, `_ns"`} {
		if strings.Contains(out, bad) {
			t.Errorf("%s in:\n%s", bad, out)
		}
	}
}
