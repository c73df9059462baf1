package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/internal/cmd/clikit"
)

// TestTop prints frames of the overview on the memory store: one with
// --once (compared with testdata/top.txt), two with --count 2.
func TestTop(t *testing.T) {
	e := memEnv(t)
	e.ok("bucket", "put", "openai#rpm", "--type", "requests", "--capacity", "60", "--per", "1m")
	e.ok("bucket", "put", "openai#tpm", "--type", "tokens", "--capacity", "1000", "--per", "1m")
	e.ok("bucket", "put", "slots", "--type", "concurrent", "--capacity", "4")
	e.ok("acquire", "openai#rpm:15", "--caller", "t1")
	e.ok("acquire", "slots", "--hold", "1h")
	e.ok("cooldown", "openai#tpm", "--for", "20s")
	golden(t, "top.txt", e.ok("top", "--once"))

	out := e.ok("top", "--count", "2", "--interval", "100ms", "slots")
	if n := strings.Count(out, "sluice top  "); n != 2 || !strings.Contains(out, "\n\nsluice top  ") {
		t.Errorf("--count 2 printed %d frames, want 2 separated by a blank line:\n%s", n, out)
	}
	if strings.Contains(out, "openai#rpm") || strings.Contains(out, "\x1b[") {
		t.Errorf("frames of slots alone, without escapes off a terminal, show:\n%s", out)
	}
}

// TestTopHistory shows the fleet's last minute from the usage history
// another process wrote to the store: three grants, a refusal and a wait
// of 300ms on openai#rpm.
func TestTopHistory(t *testing.T) {
	e := memEnv(t)
	now := time.Now().Truncate(time.Second) // the store keeps rows for 48 h of the wall clock
	e.clock.Store(now.UnixMilli())
	e.ok("bucket", "put", "openai#rpm", "--type", "requests", "--capacity", "60", "--per", "1m")
	e.ok("bucket", "put", "slots", "--type", "concurrent", "--capacity", "4")
	before := now.Truncate(time.Minute).Add(-30 * time.Second)
	rec, err := history.New(e.mem, history.WithClock(sluice.ClockFunc(func() time.Time { return before })))
	if err != nil {
		t.Fatal(err)
	}
	obs, ctx := rec.Observer(), context.Background()
	rpm := []sluice.Request{{Dimension: "openai#rpm", Cost: 1}}
	for range 3 {
		obs.Acquired(ctx, sluice.AcquireEvent{Dimensions: rpm, Outcome: sluice.Granted, Caller: "app"})
	}
	obs.Acquired(ctx, sluice.AcquireEvent{Dimensions: rpm, Outcome: sluice.RetryIn, Caller: "app",
		Results: []sluice.DimensionResult{{Dimension: "openai#rpm", Cost: 1, RetryIn: time.Second}}})
	obs.Waited(ctx, sluice.WaitEvent{Dimensions: rpm, Waited: 300 * time.Millisecond, Granted: true, Caller: "app"})
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	out := e.ok("top", "--once")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^GRANTED, REFUSED, 429s and WAIT P95: the fleet's minute from ` + before.UTC().Format("15:04") + `$`),
		regexp.MustCompile(`(?m)GRANTED\s+REFUSED\s+429s\s+WAIT P95$`),
		regexp.MustCompile(`(?m)^openai#rpm .*\s3\s+1\s+0\s+<=500ms$`),
		regexp.MustCompile(`(?m)^slots .*\s0\s+0\s+0\s+-$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("top lacks %s:\n%s", want, out)
		}
	}
}

// TestTopEmpty shows how to create buckets when there are none.
func TestTopEmpty(t *testing.T) {
	e := memEnv(t)
	if out := e.ok("top", "--once"); !strings.Contains(out, "0 buckets") || !strings.Contains(out, "no buckets (create them") {
		t.Errorf("top on an empty store:\n%s", out)
	}
}

// TestTopUsage refuses bad flags with exit 2, naming the flag.
func TestTopUsage(t *testing.T) {
	e := memEnv(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"top", "--interval", "10ms"}, "--interval 10ms"},
		{[]string{"top", "--count", "-1"}, "--count -1"},
	} {
		_, errs, code := e.run(tt.args...)
		if code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %q", tt.args, code, errs, tt.want)
		}
	}
}

func TestFillBar(t *testing.T) {
	for _, tt := range []struct {
		pct  float64
		want string
	}{
		{0, "[..........]"}, {4.9, "[..........]"}, {50, "[#####.....]"}, {100, "[##########]"}, {-3, "[..........]"}, {140, "[##########]"},
	} {
		if got := fillBar(tt.pct); got != tt.want {
			t.Errorf("fillBar(%v) = %q, want %q", tt.pct, got, tt.want)
		}
	}
}

// TestTopQueue: the QUEUE column shows the callers waiting for a
// concurrent bucket's slots, or how long until a rate bucket's
// reservations are all valid.
func TestTopQueue(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later := at.Add(2500 * time.Millisecond)
	conc := sluice.Bucket{Name: "slots", Config: sluice.ConcurrentLimit(2)}
	rate := sluice.Bucket{Name: "rpm", Config: sluice.PerMinute(sluice.Requests, 60)}
	tests := []struct {
		name string
		s    sluice.BucketState
		want string
	}{
		{"no line", sluice.BucketState{Bucket: conc, Now: at}, "-"},
		{"two waiting for slots", sluice.BucketState{Bucket: conc, Now: at, Waiters: 2}, "2 waiting"},
		{"reservations 2.5 s ahead", sluice.BucketState{Bucket: rate, Now: at, ReservedUntil: later}, clikit.Dur(2500 * time.Millisecond)},
		{"reservations past", sluice.BucketState{Bucket: rate, Now: later, ReservedUntil: at}, "-"},
	}
	for _, tt := range tests {
		if got := viewOf(tt.s).queue(); got != tt.want {
			t.Errorf("%s: queue %q, want %q", tt.name, got, tt.want)
		}
	}
}
