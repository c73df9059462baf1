package prometheus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	sluiceprom "github.com/ontopix/sluice/observe/prometheus"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// scrape serves reg with promhttp on a loopback test server and returns the
// text exposition a GET /metrics answers.
func scrape(t *testing.T, reg *prom.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// series indexes an exposition's samples by their name and labels.
func series(text string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		got[line[:i]] = line[i+1:]
	}
	return got
}

func newObserver(t *testing.T, opts ...sluiceprom.Option) (*sluice.Observer, *prom.Registry) {
	t.Helper()
	reg := prom.NewRegistry()
	obs, err := sluiceprom.New(reg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return obs, reg
}

var (
	rpm  = sluice.Request{Dimension: "openai#rpm", Cost: 1}
	tpm  = sluice.Request{Dimension: "openai#tpm", Cost: 500}
	both = []sluice.Request{rpm, tpm}
)

// feed sends one of each kind of event, several for acquisitions.
func feed(ctx context.Context, o *sluice.Observer) {
	o.Acquired(ctx, sluice.AcquireEvent{Dimensions: both, Outcome: sluice.Granted, Duration: 2 * time.Millisecond})
	o.Acquired(ctx, sluice.AcquireEvent{Dimensions: both, Outcome: sluice.Granted, Duration: 3 * time.Millisecond})
	o.Acquired(ctx, sluice.AcquireEvent{Dimensions: both, Outcome: sluice.RetryIn, RetryIn: 1500 * time.Millisecond, Duration: time.Millisecond})
	o.Acquired(ctx, sluice.AcquireEvent{Dimensions: both[:1], Outcome: sluice.Granted, Degraded: true, Duration: 2 * time.Second})
	o.Acquired(ctx, sluice.AcquireEvent{Dimensions: both[:1], Outcome: sluice.Granted, HandedOver: true})
	o.Acquired(ctx, sluice.AcquireEvent{Dimensions: both[1:], Err: sluice.ErrUnavailable, Duration: 2 * time.Second})
	o.Waited(ctx, sluice.WaitEvent{Dimensions: both, Waited: 1500 * time.Millisecond, Attempts: 2, Granted: true})
	o.Waited(ctx, sluice.WaitEvent{Dimensions: both, Waited: 30 * time.Second, Attempts: 7, TimedOut: true, Err: sluice.ErrSlotTimeout})
	o.Settled(ctx, sluice.SettleEvent{Dimension: "openai#tpm", Estimate: 500, Actual: 420, Applied: -80000})
	o.Settled(ctx, sluice.SettleEvent{Dimension: "openai#tpm", Estimate: 500, Actual: 900, Applied: 100000, Late: true})
	o.Settled(ctx, sluice.SettleEvent{Dimension: "openai#tpm", Estimate: 500, Actual: 600, Err: sluice.ErrUnavailable})
	o.Penalized(ctx, sluice.PenaltyEvent{Dimension: "openai#tpm", Factor: 0.5, Before: 1000, After: 500})
	o.Cooled(ctx, sluice.CooldownEvent{Dimension: "openai#rpm", Until: time.Unix(20, 0), Before: 5000})
	o.Cooled(ctx, sluice.CooldownEvent{Dimension: "openai#rpm", Err: sluice.ErrInvalid})
	o.Synced(ctx, sluice.SyncEvent{Dimension: "openai#tpm", Remaining: 3, Before: 5000, After: 3000})
	o.Synced(ctx, sluice.SyncEvent{Dimension: "openai#tpm", Remaining: 9, Before: 3000, After: 3000})
	o.Synced(ctx, sluice.SyncEvent{Dimension: "openai#tpm", Remaining: 0, Before: -1000, After: -1000})
	o.Synced(ctx, sluice.SyncEvent{Dimension: "openai#tpm", Remaining: 1, Err: sluice.ErrUnavailable})
	o.Released(ctx, sluice.ReleaseEvent{Lease: "l1", Held: 2 * time.Second, Recorded: true, Released: true})
	o.Released(ctx, sluice.ReleaseEvent{Lease: "l2", Held: 90 * time.Second})
	o.LeaseLost(ctx, sluice.LeaseLostEvent{Lease: "l3", Cause: sluice.ErrLeaseExpired})
	o.LeaseLost(ctx, sluice.LeaseLostEvent{Lease: "l4", Cause: errors.Join(errors.New("renew"), sluice.ErrUnavailable)})
	o.Reconciled(ctx, sluice.ReconcileEvent{Restored: 6, Reclaimed: 3, AlreadyCapped: 1, Orphans: 1, Duration: 4 * time.Millisecond})
	o.StoreError(ctx, sluice.StoreErrorEvent{Op: "acquire", Kind: sluice.KindUnavailable, Err: sluice.ErrUnavailable})
	o.StoreError(ctx, sluice.StoreErrorEvent{Op: "made_up", Kind: sluice.KindOther, Err: errors.New("x")})
	o.Recreated(ctx, sluice.RecreateEvent{Dimension: "openai#rpm", Op: "acquire"})
}

func TestScrapeEvents(t *testing.T) {
	obs, reg := newObserver(t)
	feed(context.Background(), obs)
	got := series(scrape(t, reg))
	tests := []struct{ series, want string }{
		{`sluice_acquire_total{dimension="openai#rpm",outcome="granted"}`, "3"}, // one handed over
		{`sluice_acquire_total{dimension="openai#tpm",outcome="granted"}`, "2"},
		{`sluice_acquire_total{dimension="openai#rpm",outcome="retry_in"}`, "1"},
		{`sluice_acquire_total{dimension="openai#tpm",outcome="retry_in"}`, "1"},
		{`sluice_acquire_total{dimension="openai#rpm",outcome="degraded"}`, "1"},
		{`sluice_acquire_total{dimension="openai#tpm",outcome="degraded"}`, "0"},
		{`sluice_acquire_total{dimension="openai#rpm",outcome="error"}`, "0"},
		{`sluice_acquire_total{dimension="openai#tpm",outcome="error"}`, "1"},
		{`sluice_degraded_grants_total{dimension="openai#rpm"}`, "1"},
		{`sluice_buckets_recreated_total{dimension="openai#rpm"}`, "1"},
		{`sluice_acquire_duration_seconds_count{outcome="granted"}`, "2"}, // not the hand-over
		{`sluice_acquire_duration_seconds_sum{outcome="granted"}`, "0.005"},
		{`sluice_acquire_duration_seconds_bucket{outcome="granted",le="0.0025"}`, "1"},
		{`sluice_acquire_duration_seconds_bucket{outcome="granted",le="0.005"}`, "2"},
		{`sluice_acquire_duration_seconds_count{outcome="error"}`, "1"},
		{`sluice_retry_in_seconds_count{dimension="openai#tpm"}`, "1"},
		{`sluice_retry_in_seconds_sum{dimension="openai#tpm"}`, "1.5"},
		{`sluice_retry_in_seconds_bucket{dimension="openai#rpm",le="1"}`, "0"},
		{`sluice_retry_in_seconds_bucket{dimension="openai#rpm",le="2.5"}`, "1"},
		{`sluice_wait_seconds_count{result="granted"}`, "1"},
		{`sluice_wait_seconds_sum{result="timeout"}`, "30"},
		{`sluice_wait_seconds_count{result="error"}`, "0"},
		{`sluice_wait_attempts_sum{result="timeout"}`, "7"},
		{`sluice_dimension_wait_seconds_count{dimension="openai#rpm",result="granted"}`, "1"},
		{`sluice_dimension_wait_seconds_count{dimension="openai#tpm",result="granted"}`, "1"},
		{`sluice_dimension_wait_seconds_sum{dimension="openai#tpm",result="timeout"}`, "30"},
		{`sluice_dimension_wait_seconds_count{dimension="openai#rpm",result="error"}`, "0"},
		{`sluice_settlements_total{dimension="openai#tpm",result="ok"}`, "1"},
		{`sluice_settlements_total{dimension="openai#tpm",result="late"}`, "1"},
		{`sluice_settlements_total{dimension="openai#tpm",result="error"}`, "1"},
		{`sluice_settle_estimated_tokens_total{dimension="openai#tpm"}`, "1000"},
		{`sluice_settle_actual_tokens_total{dimension="openai#tpm"}`, "1320"},
		{`sluice_settle_delta_tokens_sum{dimension="openai#tpm"}`, "320"},
		{`sluice_settle_delta_tokens_bucket{dimension="openai#tpm",le="-10"}`, "1"},
		{`sluice_settle_delta_tokens_bucket{dimension="openai#tpm",le="100"}`, "1"},
		{`sluice_settle_delta_tokens_bucket{dimension="openai#tpm",le="1000"}`, "2"},
		{`sluice_settle_clamped_total{dimension="openai#tpm"}`, "1"},
		{`sluice_penalties_total{dimension="openai#tpm",result="ok"}`, "1"},
		{`sluice_cooldowns_total{dimension="openai#rpm",result="ok"}`, "1"},
		{`sluice_cooldowns_total{dimension="openai#rpm",result="error"}`, "1"},
		{`sluice_syncs_total{dimension="openai#tpm",result="lowered"}`, "1"},
		{`sluice_syncs_total{dimension="openai#tpm",result="unchanged"}`, "2"},
		{`sluice_syncs_total{dimension="openai#tpm",result="error"}`, "1"},
		{`sluice_sync_drift_tokens{dimension="openai#tpm"}`, "-1"},
		{`sluice_sync_drift_ahead_tokens_total{dimension="openai#tpm"}`, "2"},
		{`sluice_releases_total{result="released"}`, "1"},
		{`sluice_releases_total{result="unrecorded"}`, "1"},
		{`sluice_lease_held_seconds_sum`, "92"},
		{`sluice_leases_lost_total{cause="expired"}`, "1"},
		{`sluice_leases_lost_total{cause="unavailable"}`, "1"},
		{`sluice_leases_lost_total{cause="unknown_lease"}`, "0"},
		{`sluice_reconcile_runs_total{result="ok"}`, "1"},
		{`sluice_reconcile_duration_seconds_sum`, "0.004"},
		{`sluice_reconcile_restored_total{result="reclaimed"}`, "2"},
		{`sluice_reconcile_restored_total{result="already_capped"}`, "1"},
		{`sluice_reconcile_restored_total{result="cleaned"}`, "2"},
		{`sluice_reconcile_restored_total{result="orphan"}`, "1"},
		{`sluice_store_errors_total{kind="unavailable",op="acquire"}`, "1"},
		{`sluice_store_errors_total{kind="other",op="other"}`, "1"},
	}
	for _, tt := range tests {
		if g, ok := got[tt.series]; !ok {
			t.Errorf("%s missing from the scrape", tt.series)
		} else if g != tt.want {
			t.Errorf("%s = %s, want %s", tt.series, g, tt.want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", strings.Join(sortedKeys(got), "\n"))
	}
}

func TestMaxDimensions(t *testing.T) {
	obs, reg := newObserver(t, sluiceprom.WithMaxDimensions(2))
	ctx := context.Background()
	for _, d := range []string{"a", "b", "c", "d", "a"} {
		obs.Acquired(ctx, sluice.AcquireEvent{Dimensions: []sluice.Request{{Dimension: d, Cost: 1}}, Outcome: sluice.Granted})
	}
	got := series(scrape(t, reg))
	tests := []struct{ series, want string }{
		{`sluice_acquire_total{dimension="a",outcome="granted"}`, "2"},
		{`sluice_acquire_total{dimension="b",outcome="granted"}`, "1"},
		{`sluice_acquire_total{dimension="_other",outcome="granted"}`, "2"},
		{`sluice_acquire_total{dimension="c",outcome="granted"}`, ""},
		{`sluice_acquire_total{dimension="d",outcome="granted"}`, ""},
	}
	for _, tt := range tests {
		if g := got[tt.series]; g != tt.want {
			t.Errorf("%s = %q, want %q", tt.series, g, tt.want)
		}
	}
}

func TestConstLabels(t *testing.T) {
	obs, reg := newObserver(t, sluiceprom.WithConstLabels(prom.Labels{"service": "api"}))
	obs.Released(context.Background(), sluice.ReleaseEvent{Recorded: true, Released: true})
	got := series(scrape(t, reg))
	if g, want := got[`sluice_releases_total{result="released",service="api"}`], "1"; g != want {
		t.Errorf("released with const label = %q, want %q", g, want)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name    string
		reg     prom.Registerer
		opts    []sluiceprom.Option
		invalid bool
		want    string
	}{
		{"zero max dimensions", prom.NewRegistry(), []sluiceprom.Option{sluiceprom.WithMaxDimensions(0)}, true, `max_dimensions "0"`},
		{"nil registerer", nil, nil, true, "registerer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sluiceprom.New(tt.reg, tt.opts...)
			if err == nil {
				t.Fatal("New succeeded")
			}
			if got := errors.Is(err, sluice.ErrInvalid); got != tt.invalid {
				t.Errorf("errors.Is(%v, ErrInvalid) = %v, want %v", err, got, tt.invalid)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %q", err, tt.want)
			}
		})
	}
}

// TestRegisterTwice checks that a second New on the same registry fails
// with prometheus.AlreadyRegisteredError and leaves the first one's metrics
// as they were.
func TestRegisterTwice(t *testing.T) {
	obs, reg := newObserver(t)
	obs.Released(context.Background(), sluice.ReleaseEvent{Recorded: true, Released: true})
	_, err := sluiceprom.New(reg)
	var are prom.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("second New: err = %v, want an AlreadyRegisteredError", err)
	}
	if errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("second New: %v matches ErrInvalid", err)
	}
	if g, want := series(scrape(t, reg))[`sluice_releases_total{result="released"}`], "1"; g != want {
		t.Errorf("after the failed New, released = %q, want %q", g, want)
	}
}

// failingRegisterer accepts the first n collectors, refuses the next and
// records what stays registered.
type failingRegisterer struct {
	n    int
	live map[prom.Collector]bool
}

func (r *failingRegisterer) Register(c prom.Collector) error {
	if len(r.live) == r.n {
		return errors.New("refused")
	}
	r.live[c] = true
	return nil
}

func (r *failingRegisterer) MustRegister(cs ...prom.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *failingRegisterer) Unregister(c prom.Collector) bool {
	ok := r.live[c]
	delete(r.live, c)
	return ok
}

// TestRegisterRollback checks that New leaves nothing registered when the
// registry refuses one of its metrics.
func TestRegisterRollback(t *testing.T) {
	for _, n := range []int{0, 1, 5, 18} {
		reg := &failingRegisterer{n: n, live: map[prom.Collector]bool{}}
		if _, err := sluiceprom.New(reg); err == nil {
			t.Fatalf("refusing collector %d: New succeeded", n)
		}
		if got := len(reg.live); got != 0 {
			t.Errorf("refusing collector %d: %d collectors left registered, want 0", n, got)
		}
	}
}

// TestConcurrentHooks feeds the same events from several goroutines, new
// dimensions appearing meanwhile, and checks the totals (run with -race).
func TestConcurrentHooks(t *testing.T) {
	obs, reg := newObserver(t)
	const goroutines, rounds = 8, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				feed(context.Background(), obs)
				dim := sluice.Request{Dimension: fmt.Sprintf("d%d", (g+i)%5), Cost: 1}
				obs.Acquired(context.Background(), sluice.AcquireEvent{Dimensions: []sluice.Request{dim}, Outcome: sluice.Granted})
			}
		})
	}
	wg.Wait()
	got := series(scrape(t, reg))
	n := fmt.Sprint(goroutines * rounds)
	tests := []struct{ series, want string }{
		{`sluice_acquire_total{dimension="openai#rpm",outcome="granted"}`, fmt.Sprint(3 * goroutines * rounds)},
		{`sluice_settlements_total{dimension="openai#tpm",result="error"}`, n},
		{`sluice_releases_total{result="unrecorded"}`, n},
		{`sluice_acquire_total{dimension="d0",outcome="granted"}`, fmt.Sprint(goroutines * rounds / 5)},
	}
	for _, tt := range tests {
		if g := got[tt.series]; g != tt.want {
			t.Errorf("%s = %q, want %q", tt.series, g, tt.want)
		}
	}
}

// TestRetryInPerDimension: when the event carries per-dimension results,
// only the dimensions that were short record a wait, their own.
func TestRetryInPerDimension(t *testing.T) {
	obs, reg := newObserver(t)
	obs.Acquired(context.Background(), sluice.AcquireEvent{Dimensions: both, Outcome: sluice.RetryIn, RetryIn: 2 * time.Second,
		Results: []sluice.DimensionResult{{Dimension: "openai#rpm"}, {Dimension: "openai#tpm", RetryIn: 2 * time.Second}}})
	got := series(scrape(t, reg))
	for _, tt := range []struct{ series, want string }{
		{`sluice_acquire_total{dimension="openai#rpm",outcome="retry_in"}`, "1"},
		{`sluice_acquire_total{dimension="openai#tpm",outcome="retry_in"}`, "1"},
		{`sluice_retry_in_seconds_count{dimension="openai#rpm"}`, "0"},
		{`sluice_retry_in_seconds_count{dimension="openai#tpm"}`, "1"},
		{`sluice_retry_in_seconds_sum{dimension="openai#tpm"}`, "2"},
	} {
		if g := got[tt.series]; g != tt.want {
			t.Errorf("%s = %q, want %q", tt.series, g, tt.want)
		}
	}
}
