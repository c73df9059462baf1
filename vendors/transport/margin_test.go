package transport_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// TestRequestMarginAbsorbsArrivalJitter runs 8 workers through the
// transport against Anthropic at 50 RPM, whose vendor bucket holds one
// request, with calls taking 0 to 40 ms more or less to reach the vendor.
// The Reactor syncs and follows the headers, as by default. With the
// default request margin no call is refused and at least 95 % of
// the limit is used; without it (WithRequestMargin(0)) requests admitted
// 1.22 s apart reach the vendor closer than its 1.2 s and draw 429s.
func TestRequestMarginAbsorbsArrivalJitter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		margin  time.Duration
		want429 bool
	}{
		{"default margin", vendors.DefaultRequestMargin, false},
		{"no margin", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const rpm, run = 50, 3 * time.Minute
				p, err := vendors.AnthropicProfile(vendors.AnthropicLimits{RPM: rpm, InputTPM: 10_000_000, OutputTPM: 10_000_000},
					vendors.WithRequestMargin(tc.margin))
				if err != nil {
					t.Fatal(err)
				}
				sim := vendorsim.Config{Vendor: vendorsim.Anthropic, Seed: 7,
					Limits:        vendorsim.Limits{RPM: rpm, ITPM: 10_000_000, OTPM: 10_000_000},
					ArrivalJitter: vendorsim.Uniform(0, 0.040)}
				e := newEnvClock(t, sim, p, nil)
				ac := anthropicClient(e, 0)
				ctx, cancel := context.WithTimeout(context.Background(), run)
				defer cancel()
				var wg sync.WaitGroup
				var errs atomic.Int64
				var firstErr atomic.Pointer[error]
				for range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for ctx.Err() == nil {
							if _, err := ac.Messages.New(ctx, messageParams(16), aSeven); err != nil && ctx.Err() == nil {
								errs.Add(1)
								firstErr.CompareAndSwap(nil, &err)
								time.Sleep(time.Second) // a caller backs off; keeps virtual time moving
							}
						}
					}()
				}
				wg.Wait()
				if p := firstErr.Load(); p != nil {
					t.Logf("%d calls failed, the first with %v", errs.Load(), *p)
				}
				st := e.sim.Stats()
				use := float64(st.Admitted) / (float64(rpm) * run.Minutes())
				t.Logf("margin %v: %d admitted (%.1f %% of %d RPM over %v), %d rate-limited", tc.margin, st.Admitted, 100*use, rpm, run, st.RateLimited)
				if got := st.RateLimited > 0; got != tc.want429 {
					t.Errorf("429s: %d, want any: %v", st.RateLimited, tc.want429)
				}
				if !tc.want429 && use < 0.95 {
					t.Errorf("use %.1f %%, want at least 95 %%", 100*use)
				}
			})
		})
	}
}
