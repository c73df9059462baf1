package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/cmd/verify"
	"github.com/ontopix/sluice/store"
)

// run runs sluice-demo with args and returns its stdout, stderr and exit
// code.
func run(args ...string) (string, string, int) {
	var out, errs bytes.Buffer
	code := Main(context.Background(), args, clikit.Env{Stdout: &out, Stderr: &errs})
	return out.String(), errs.String(), code
}

func TestSluiceDemo(t *testing.T) {
	out, errs, code := run("--duration", "500ms", "--workers", "6", "--progress", "plain")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	for _, want := range []string{"openai#rpm", "openai#tpm", "elevenlabs#concurrent", "verdict: no limit exceeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errs, "sluice-demo: 6 workers share") {
		t.Errorf("stderr lacks the banner:\n%s", errs)
	}
}

func TestSluiceDemoUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "1"}, "--workers 1"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"extra"}, "takes no arguments"},
		{[]string{"-o", "yaml"}, "--output"},
	}
	for _, tt := range tests {
		out, errs, code := run(tt.args...)
		if code != clikit.ExitUsage || !strings.Contains(errs, tt.want) || !strings.HasPrefix(errs, "sluice-demo: ") {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d and one line with %q", tt.args, code, errs, out, clikit.ExitUsage, tt.want)
		}
	}
}

func TestSluiceDemoVersion(t *testing.T) {
	out, errs, code := run("--version")
	if want := "sluice-demo devel\n"; code != 0 || out != want {
		t.Fatalf("sluice-demo --version: exit %d, stdout %q, stderr %q; want exit 0, %q", code, out, errs, want)
	}
}

// The demo's table shows the bound a bucket's use is checked against: its
// capacity plus the refill over the run, from the bucket's configuration.
func TestDemoAllowed(t *testing.T) {
	for _, c := range []struct {
		cfg            bucket.Config
		consumed, span int64 // tokens, ms
		want           string
	}{
		{bucket.PerPeriod(bucket.Requests, 600, time.Minute), 642, 60_100, "≤ 1201 allowed (capacity 600 + 600/min × 60.1 s)"},
		{bucket.Config{Type: bucket.Requests, Capacity: 50, RefillAmount: 600, RefillPeriod: time.Minute}, 642, 60_100, "≤ 651 allowed (capacity 50 + 600/min × 60.1 s)"},
		{bucket.PerPeriod(bucket.Tokens, 100, time.Second), 1_500, 10_000, "> 1100 allowed (capacity 100 + 100/s × 10.0 s)"},
	} {
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		in := verify.Input{Buckets: []store.Bucket{{Name: "v#d", Config: c.cfg}}, Start: start, End: start.Add(time.Duration(c.span) * time.Millisecond),
			Events: []verify.Event{{Dimension: "v#d", Kind: verify.Grant, Time: start, Milli: c.consumed * bucket.Milli}}}
		r, err := verify.Check(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := allowed(r.Dimensions[0], r.End.Sub(r.Start)); got != c.want {
			t.Errorf("%v: got %q, want %q", c.cfg, got, c.want)
		}
	}
}
