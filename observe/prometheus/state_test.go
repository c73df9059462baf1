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
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	sluiceprom "github.com/ontopix/sluice/observe/prometheus"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/remotestore"
	prom "github.com/prometheus/client_golang/prometheus"
)

// stateClient returns a Client over memstore with three buckets: v#rpm (60
// requests a minute), v#tpm (1000 tokens a minute) and v#conc (4 concurrent
// slots). clock is nil for the system clock.
func stateClient(t *testing.T, clock sluice.Clock) *sluice.Client {
	t.Helper()
	opts := []sluice.Option{}
	if clock != nil {
		opts = append(opts, sluice.WithClock(clock))
	}
	client, err := sluice.New(memstore.New(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	for _, b := range []sluice.Bucket{
		{Name: "v#rpm", Config: sluice.PerMinute(sluice.Requests, 60)},
		{Name: "v#tpm", Config: sluice.PerMinute(sluice.Tokens, 1000)},
		{Name: "v#conc", Config: sluice.ConcurrentLimit(4)},
	} {
		if err := client.PutBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	return client
}

func newState(t *testing.T, client *sluice.Client, opts ...sluiceprom.Option) *prom.Registry {
	t.Helper()
	col, err := sluiceprom.NewStateCollector(client, opts...)
	if err != nil {
		t.Fatalf("NewStateCollector: %v", err)
	}
	reg := prom.NewRegistry()
	if err := reg.Register(col); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return reg
}

// TestStateGauges drives a real Client over memstore into a known state —
// two concurrent leases of which one expired, a tokens bucket in debt, a
// requests bucket cooling down — and checks every gauge.
func TestStateGauges(t *testing.T) {
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	clock := sluice.ClockFunc(func() time.Time { return now })
	ctx := context.Background()
	client := stateClient(t, clock)
	for _, ttl := range []time.Duration{time.Minute, 10 * time.Minute} {
		if res, err := client.Acquire(ctx, "v#conc", sluice.WithTTL(ttl)); err != nil || !res.Granted() {
			t.Fatalf("Acquire(v#conc) = %v, %v", res.Outcome, err)
		}
	}
	now = now.Add(2 * time.Minute) // the first lease expired; nothing reconciles it
	res, err := client.Acquire(ctx, "v#tpm", sluice.WithCost(600))
	if err != nil || !res.Granted() {
		t.Fatalf("Acquire(v#tpm) = %v, %v", res.Outcome, err)
	}
	if _, err := res.Lease.Settle(ctx, "v#tpm", 1600); err != nil { // 1000 - 1600 = -600
		t.Fatal(err)
	}
	if _, err := client.CooldownFor(ctx, "v#rpm", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got := series(scrape(t, newState(t, client)))
	tests := []struct{ series, want string }{
		{`sluice_state_up`, "1"},
		{`sluice_state_buckets`, "3"},
		{`sluice_state_reads_total{result="ok"}`, "1"},
		{`sluice_state_reads_total{result="error"}`, "0"},

		{`sluice_bucket_tokens{dimension="v#tpm"}`, "-600"},
		{`sluice_bucket_capacity_tokens{dimension="v#tpm",type="tokens"}`, "1000"},
		{`sluice_bucket_fill_ratio{dimension="v#tpm"}`, "0"},
		{`sluice_bucket_debt_tokens{dimension="v#tpm"}`, "600"},
		{`sluice_bucket_queue_seconds{dimension="v#tpm"}`, "36"}, // 600 tokens at 1000 a minute
		{`sluice_bucket_cooldown_seconds{dimension="v#tpm"}`, "0"},
		{`sluice_bucket_leases{dimension="v#tpm"}`, "0"}, // tokens leases keep no record

		{`sluice_bucket_tokens{dimension="v#rpm"}`, "0"}, // a cooldown empties the bucket
		{`sluice_bucket_capacity_tokens{dimension="v#rpm",type="requests"}`, "60"},
		{`sluice_bucket_debt_tokens{dimension="v#rpm"}`, "0"},
		{`sluice_bucket_cooldown_seconds{dimension="v#rpm"}`, "10"},
		{`sluice_bucket_queue_seconds{dimension="v#rpm"}`, "10"},

		{`sluice_bucket_tokens{dimension="v#conc"}`, "2"},
		{`sluice_bucket_capacity_tokens{dimension="v#conc",type="concurrent"}`, "4"},
		{`sluice_bucket_fill_ratio{dimension="v#conc"}`, "0.5"},
		{`sluice_bucket_leases{dimension="v#conc"}`, "2"},
		{`sluice_bucket_expired_leases{dimension="v#conc"}`, "1"},
		{`sluice_bucket_queue_seconds{dimension="v#conc"}`, ""}, // no refill, no line in time
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

// TestStateFillRatio checks the fill ratio of a bucket partly used.
func TestStateFillRatio(t *testing.T) {
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	client := stateClient(t, sluice.ClockFunc(func() time.Time { return now }))
	if _, err := client.Acquire(context.Background(), "v#tpm", sluice.WithCost(250)); err != nil {
		t.Fatal(err)
	}
	mfs, err := newState(t, client).Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_bucket_fill_ratio" {
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	want := map[string]float64{"v#conc": 1, "v#rpm": 1, "v#tpm": 0.75}
	if len(got) != len(want) {
		t.Errorf("fill ratios = %v, want %v", got, want)
	}
	for d, w := range want {
		if got[d] != w {
			t.Errorf("sluice_bucket_fill_ratio{dimension=%q} = %v, want %v", d, got[d], w)
		}
	}
}

// TestStateCache checks that scrapes within the cache period, in sequence
// or at once, share one read, and that the next read after the period
// sees what changed.
func TestStateCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		client := stateClient(t, nil)
		reg := newState(t, client, sluiceprom.WithStateCacheFor(5*time.Second))
		reads := func() float64 {
			t.Helper()
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() == "sluice_state_reads_total" {
					for _, m := range mf.GetMetric() {
						if m.GetLabel()[0].GetValue() == "ok" {
							return m.GetCounter().GetValue()
						}
					}
				}
			}
			t.Fatal("no sluice_state_reads_total")
			return 0
		}
		tokens := func() string { return series(scrape(t, reg))[`sluice_bucket_tokens{dimension="v#tpm"}`] }
		if got := tokens(); got != "1000" {
			t.Fatalf("first scrape: tokens = %s, want 1000", got)
		}
		if _, err := client.Acquire(ctx, "v#tpm", sluice.WithCost(400)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := tokens(); got != "1000" {
			t.Errorf("within the cache period: tokens = %s, want the cached 1000", got)
		}
		if got := reads(); got != 1 {
			t.Errorf("reads after 13 scrapes within the period = %v, want 1", got)
		}
		time.Sleep(5 * time.Second)
		if got := tokens(); got != "683.333" { // 600, refilled for 5 s at 1000 a minute
			t.Errorf("after the cache period: tokens = %s, want 683.333", got)
		}
		if got := reads(); got != 2 {
			t.Errorf("reads after the period = %v, want 2", got)
		}
	})
}

// TestStateReadFails checks a read that fails: sluice_state_up is 0, the
// failure is counted and no bucket gauge is exported; the failure is
// cached like a success.
func TestStateReadFails(t *testing.T) {
	client := stateClient(t, nil)
	reg := newState(t, client, sluiceprom.WithStateDimensions("v#tpm", "no#such"), sluiceprom.WithStateCacheFor(time.Hour))
	for range 3 {
		got := series(scrape(t, reg))
		for k := range got {
			if strings.HasPrefix(k, "sluice_bucket_") {
				t.Errorf("a failed read exported %s", k)
			}
		}
		for _, tt := range []struct{ series, want string }{
			{`sluice_state_up`, "0"},
			{`sluice_state_reads_total{result="error"}`, "1"},
			{`sluice_state_reads_total{result="ok"}`, "0"},
			{`sluice_state_buckets`, ""},
		} {
			if g := got[tt.series]; g != tt.want {
				t.Errorf("%s = %q, want %q", tt.series, g, tt.want)
			}
		}
	}
}

// TestStateDimensions checks the two caps: WithStateDimensions reads the
// named buckets only, WithMaxDimensions exports the first by name.
func TestStateDimensions(t *testing.T) {
	client := stateClient(t, nil)
	tests := []struct {
		name string
		opts []sluiceprom.Option
		want []string // dimensions exported
		all  string   // sluice_state_buckets
	}{
		{"all", nil, []string{"v#conc", "v#rpm", "v#tpm"}, "3"},
		{"max 2", []sluiceprom.Option{sluiceprom.WithMaxDimensions(2)}, []string{"v#conc", "v#rpm"}, "3"},
		{"named", []sluiceprom.Option{sluiceprom.WithStateDimensions("v#tpm", "v#rpm")}, []string{"v#rpm", "v#tpm"}, "2"},
		{"named, max 1", []sluiceprom.Option{sluiceprom.WithStateDimensions("v#tpm", "v#rpm"), sluiceprom.WithMaxDimensions(1)}, []string{"v#tpm"}, "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := series(scrape(t, newState(t, client, tt.opts...)))
			var dims []string
			for _, d := range []string{"v#conc", "v#rpm", "v#tpm"} {
				if _, ok := got[`sluice_bucket_tokens{dimension="`+d+`"}`]; ok {
					dims = append(dims, d)
				}
			}
			if strings.Join(dims, " ") != strings.Join(tt.want, " ") {
				t.Errorf("exported %v, want %v", dims, tt.want)
			}
			if g := got["sluice_state_buckets"]; g != tt.all {
				t.Errorf("sluice_state_buckets = %s, want %s", g, tt.all)
			}
		})
	}
}

func TestNewStateCollectorErrors(t *testing.T) {
	client := stateClient(t, nil)
	tests := []struct {
		name   string
		client *sluice.Client
		opts   []sluiceprom.Option
		field  string
	}{
		{"nil client", nil, nil, "client"},
		{"zero timeout", client, []sluiceprom.Option{sluiceprom.WithStateTimeout(0)}, "state_timeout"},
		{"negative cache", client, []sluiceprom.Option{sluiceprom.WithStateCacheFor(-time.Second)}, "state_cache_for"},
		{"empty dimension", client, []sluiceprom.Option{sluiceprom.WithStateDimensions("v#rpm", "")}, "state_dimensions"},
		{"dimension twice", client, []sluiceprom.Option{sluiceprom.WithStateDimensions("v#rpm", "v#tpm", "v#rpm")}, "state_dimensions"},
		{"no dimensions", client, []sluiceprom.Option{sluiceprom.WithMaxDimensions(0)}, "max_dimensions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sluiceprom.NewStateCollector(tt.client, tt.opts...)
			var fe *sluice.FieldError
			if !errors.Is(err, sluice.ErrInvalid) || !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("NewStateCollector = %v, want a FieldError for %s matching ErrInvalid", err, tt.field)
			}
		})
	}
}

// TestWaitingInLine runs waiters in line on a real Client and checks what
// an alert can see while they wait and after: the debt and the line in
// time while they sleep, then their waits per dimension, while
// sluice_acquire_total{outcome="retry_in"} stays at zero throughout.
func TestWaitingInLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		reg := prom.NewRegistry()
		obs, err := sluiceprom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		client, err := sluice.New(memstore.New(), sluice.WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		if err := client.PutBucket(ctx, sluice.Bucket{Name: "v#rpm", Config: sluice.PerMinute(sluice.Requests, 60)}); err != nil {
			t.Fatal(err)
		}
		col, err := sluiceprom.NewStateCollector(client, sluiceprom.WithStateCacheFor(0))
		if err != nil {
			t.Fatal(err)
		}
		reg.MustRegister(col)
		if err := client.PutBucket(ctx, sluice.Bucket{Name: "v#conc", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		if res, err := client.Acquire(ctx, "v#rpm", sluice.WithCost(60)); err != nil || !res.Granted() {
			t.Fatalf("Acquire = %v, %v", res.Outcome, err)
		}
		slot, err := client.Acquire(ctx, "v#conc")
		if err != nil || !slot.Granted() {
			t.Fatalf("Acquire v#conc = %v, %v", slot.Outcome, err)
		}
		var wg sync.WaitGroup
		for range 2 { // both wait in line for the one slot
			wg.Go(func() {
				l, err := client.Wait(ctx, []sluice.Request{{Dimension: "v#conc", Cost: 1}})
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Second)
				l.Release(ctx)
			})
		}
		for range 3 { // each waits in line for one request: 1, 2 and 3 s
			wg.Go(func() {
				l, err := client.Wait(ctx, []sluice.Request{{Dimension: "v#rpm", Cost: 1}})
				if err != nil {
					t.Error(err)
					return
				}
				l.Release(ctx)
			})
		}
		synctest.Wait() // all three sleep in line
		during := series(scrape(t, reg))
		slot.Lease.Release(ctx)
		wg.Wait()
		after := series(scrape(t, reg))
		tests := []struct {
			got       map[string]string
			series, w string
		}{
			{during, `sluice_bucket_tokens{dimension="v#rpm"}`, "-3"},
			{during, `sluice_bucket_debt_tokens{dimension="v#rpm"}`, "3"},
			{during, `sluice_bucket_queue_seconds{dimension="v#rpm"}`, "3"},
			{during, `sluice_acquire_total{dimension="v#rpm",outcome="retry_in"}`, "0"},
			{during, `sluice_bucket_waiters{dimension="v#conc"}`, "2"},
			{after, `sluice_bucket_waiters{dimension="v#conc"}`, "0"},
			{after, `sluice_dimension_wait_seconds_count{dimension="v#rpm",result="granted"}`, "3"},
			{after, `sluice_dimension_wait_seconds_sum{dimension="v#rpm",result="granted"}`, "6"},
			{after, `sluice_dimension_wait_seconds_bucket{dimension="v#rpm",result="granted",le="1"}`, "1"},
			{after, `sluice_dimension_wait_seconds_bucket{dimension="v#rpm",result="granted",le="2.5"}`, "2"},
			{after, `sluice_wait_seconds_count{result="granted"}`, "5"}, // and the two slots
			{after, `sluice_acquire_total{dimension="v#rpm",outcome="retry_in"}`, "0"},
			{after, `sluice_bucket_debt_tokens{dimension="v#rpm"}`, "0"},
		}
		for _, tt := range tests {
			if g := tt.got[tt.series]; g != tt.w {
				t.Errorf("%s = %q, want %q", tt.series, g, tt.w)
			}
		}
		if t.Failed() {
			t.Logf("during:\n%v", sortedKeys(during))
		}
	})
}

// TestStateTimeout reads the buckets from a store that never answers (a
// remote store whose service hangs, on loopback), with the Client's own
// bound off: WithStateTimeout alone ends the read, and the scrape answers
// sluice_state_up 0. Without it the test would hang until go test's
// timeout.
func TestStateTimeout(t *testing.T) {
	cancelled := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/Capabilities") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"result":{}}`)
			return
		}
		io.Copy(io.Discard, r.Body) // then the server notices the caller leave
		<-r.Context().Done()        // hang until the caller gives up
		cancelled <- r.URL.Path
	}))
	defer srv.Close()
	ctx := context.Background()
	st, err := remotestore.Open(ctx, srv.URL, remotestore.WithTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := sluice.DefaultConfig()
	cfg.OpTimeout = 0 // no bound of the Client's own
	client, err := sluice.New(st, sluice.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reg := newState(t, client, sluiceprom.WithStateTimeout(50*time.Millisecond))
	got := series(scrape(t, reg))
	if got["sluice_state_up"] != "0" || got[`sluice_state_reads_total{result="error"}`] != "1" {
		t.Errorf("a read past the timeout: up %q, errors %q; want 0 and 1", got["sluice_state_up"], got[`sluice_state_reads_total{result="error"}`])
	}
	if p := <-cancelled; !strings.HasSuffix(p, "ListBuckets") {
		t.Errorf("the call cancelled was %s, want ListBuckets", p)
	}
}
