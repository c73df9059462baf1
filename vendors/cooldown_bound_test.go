package vendors_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
)

// boundEnv is reactorEnv with the Client's log in a buffer.
func boundEnv(t *testing.T) (*reactorEnv, *bytes.Buffer) {
	t.Helper()
	e := newReactorEnv(t)
	var buf bytes.Buffer
	c, err := sluice.New(memstore.New(), sluice.WithClock(e.clock), sluice.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range e.profile.Buckets() {
		if err := c.PutBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	e.client = c
	return e, &buf
}

// A day's retry-after on a per-minute limit is implausible: the cooldown
// is clamped to the bound (two windows by default, or as configured),
// logged and counted; a plausible one is applied as given.
func TestReactorClampsAnImplausibleCooldown(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter string
		opts       []vendors.ReactorOption
		want       time.Duration
		clamped    bool
	}{
		{"a day, default bound", "86400", nil, 2 * time.Minute, true},
		{"a day, bound of 5 windows", "86400", []vendors.ReactorOption{vendors.WithCooldownBound(5)}, 5 * time.Minute, true},
		{"plausible", "90", nil, 90 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, logs := boundEnv(t)
			r := e.reactor(tt.opts...)
			re, err := r.Observe(e.ctx, 429, header("retry-after", tt.retryAfter), []byte(openAITPM429))
			if err != nil {
				t.Fatal(err)
			}
			if len(re.Cooled) != 1 || re.Cooled[0] != e.tpm {
				t.Fatalf("Cooled = %v, want [%s]", re.Cooled, e.tpm)
			}
			s := e.state(t, e.tpm)
			if got := s.CooldownUntil.Sub(e.clock.Now()); got != tt.want {
				t.Errorf("cooldown %v, want %v", got, tt.want)
			}
			wantN := uint64(0)
			if tt.clamped {
				wantN = 1
			}
			if got := r.Implausible(); got != wantN {
				t.Errorf("Implausible() = %d, want %d", got, wantN)
			}
			if got := len(re.Clamped) == 1 && re.Clamped[0] == e.tpm; got != tt.clamped {
				t.Errorf("Clamped = %v, want clamped %v", re.Clamped, tt.clamped)
			}
			if got := strings.Contains(logs.String(), "vendors.cooldown_clamped"); got != tt.clamped {
				t.Errorf("logged %v, want %v: %s", got, tt.clamped, logs)
			}
		})
	}
}

// A quota 429 with a day's retry-after still cools nothing down.
func TestReactorQuotaWithLongRetryAfterCoolsNothing(t *testing.T) {
	e, _ := boundEnv(t)
	body := `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}`
	re, err := e.reactor().Observe(e.ctx, 429, header("retry-after", "86400"), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(re.Cooled) != 0 || len(re.Clamped) != 0 {
		t.Errorf("Cooled %v Clamped %v, want nothing", re.Cooled, re.Clamped)
	}
	if s := e.state(t, e.tpm); !s.CooldownUntil.IsZero() {
		t.Errorf("tpm cooled until %v", s.CooldownUntil)
	}
}

// A 429 that names no limit (a proxy's page, a body without a type) is
// bounded as the profile's shortest window's would be: a day's
// retry-after cools no dimension, the daily one included, for more than
// that, as every call needs every dimension. A daily limit's own 429
// names it.
func TestUnattributed429CoolsNoDimensionForADay(t *testing.T) {
	clk := &manualClock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	c, err := sluice.New(memstore.New(), sluice.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	p, err := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 500, TPM: 30_000, RPD: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, b := range p.Buckets() {
		if err := c.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	r := vendors.NewReactor(c, p, vendors.WithReactorClock(clk))
	re, err := r.Observe(ctx, 429, header("retry-after", "86400"), []byte("<html><body>429 Too Many Requests</body></html>"))
	if err != nil {
		t.Fatal(err)
	}
	if len(re.Cooled) != len(p.Dimensions) {
		t.Errorf("cooled %v, want every dimension of the profile", re.Cooled)
	}
	for _, d := range p.Dimensions {
		s, err := c.GetBucket(ctx, d.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CooldownUntil.Sub(clk.Now()); got > 2*time.Minute+time.Second {
			t.Errorf("%s cooled for %v by a 429 naming no limit, want at most the per-minute bound", d.Name, got)
		}
	}
}
