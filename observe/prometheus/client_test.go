package prometheus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
)

// TestScrapeClient drives a real Client over memstore with the adapter and
// scrapes what its decisions produced.
func TestScrapeClient(t *testing.T) {
	obs, reg := newObserver(t)
	clock := sluice.ClockFunc(func() time.Time { return time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC) })
	ctx := context.Background()
	client, err := sluice.New(memstore.New(), sluice.WithClock(clock), sluice.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []sluice.Bucket{
		{Name: "openai#rpm", Config: sluice.PerMinute(sluice.Requests, 2)},
		{Name: "openai#tpm", Config: sluice.PerMinute(sluice.Tokens, 30_000)},
	} {
		if err := client.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	res, err := client.AcquireMany(ctx, []sluice.Request{{Dimension: "openai#rpm", Cost: 1}, {Dimension: "openai#tpm", Cost: 2_000}})
	if err != nil || !res.Granted() {
		t.Fatalf("AcquireMany = %v, %v", res.Outcome, err)
	}
	if _, err := res.Lease.Settle(ctx, "openai#tpm", 2_600); err != nil {
		t.Fatal(err)
	}
	if err := res.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second is denied: 2 per minute, the clock stands still
		if _, err := client.Acquire(ctx, "openai#rpm"); err != nil {
			t.Fatal(err)
		}
	}
	got := series(scrape(t, reg))
	tests := []struct{ series, want string }{
		{`sluice_acquire_total{dimension="openai#rpm",outcome="granted"}`, "2"},
		{`sluice_acquire_total{dimension="openai#rpm",outcome="retry_in"}`, "1"},
		{`sluice_acquire_total{dimension="openai#tpm",outcome="granted"}`, "1"},
		{`sluice_retry_in_seconds_sum{dimension="openai#rpm"}`, "30"},
		{`sluice_settle_estimated_tokens_total{dimension="openai#tpm"}`, "2000"},
		{`sluice_settle_actual_tokens_total{dimension="openai#tpm"}`, "2600"},
		{`sluice_settlements_total{dimension="openai#tpm",result="ok"}`, "1"},
	}
	for _, tt := range tests {
		if g := got[tt.series]; g != tt.want {
			t.Errorf("%s = %q, want %q", tt.series, g, tt.want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%v", sortedKeys(got))
	}
}

// TestReleaseResults checks each result of sluice_releases_total against a
// real Client: a lease without a record (requests and tokens only) is
// "unrecorded", a concurrent lease released while its record exists is
// "released", and one whose record the reconciler reclaimed first is
// "expired", whether released through the Lease or by id.
func TestReleaseResults(t *testing.T) {
	obs, reg := newObserver(t)
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	clock := sluice.ClockFunc(func() time.Time { return now })
	ctx := context.Background()
	client, err := sluice.New(memstore.New(), sluice.WithClock(clock), sluice.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []sluice.Bucket{
		{Name: "v#rpm", Config: sluice.PerMinute(sluice.Requests, 100)},
		{Name: "v#concurrent", Config: sluice.ConcurrentLimit(4)},
	} {
		if err := client.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	acquire := func(dim string) *sluice.Lease {
		t.Helper()
		res, err := client.Acquire(ctx, dim, sluice.WithTTL(time.Minute))
		if err != nil || !res.Granted() {
			t.Fatalf("Acquire(%s) = %v, %v", dim, res.Outcome, err)
		}
		return res.Lease
	}
	if err := acquire("v#rpm").Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := acquire("v#concurrent").Release(ctx); err != nil {
		t.Fatal(err)
	}
	stale, staleByID := acquire("v#concurrent"), acquire("v#concurrent")
	now = now.Add(2 * time.Minute)
	if _, err := client.Reconcile(ctx, sluice.ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := stale.Release(ctx); !errors.Is(err, sluice.ErrLeaseExpired) {
		t.Fatalf("releasing a reclaimed lease: %v, want ErrLeaseExpired", err)
	}
	if res, err := client.ReleaseLease(ctx, staleByID.ID()); err != nil || res.Released {
		t.Fatalf("ReleaseLease of a reclaimed lease = %+v, %v", res, err)
	}
	got := series(scrape(t, reg))
	for _, tt := range []struct{ series, want string }{
		{`sluice_releases_total{result="unrecorded"}`, "1"},
		{`sluice_releases_total{result="released"}`, "1"},
		{`sluice_releases_total{result="expired"}`, "2"},
		{`sluice_releases_total{result="error"}`, "0"},
	} {
		if g := got[tt.series]; g != tt.want {
			t.Errorf("%s = %q, want %q", tt.series, g, tt.want)
		}
	}
}
