package transport_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// windowLoad runs tpmLoad's workers against a simulator whose limits
// follow window, from offset into a calendar minute for run, each call a
// 500-token prompt with max_tokens 100.
func windowLoad(t *testing.T, window vendorsim.Window, offset, run time.Duration) readingRun {
	t.Helper()
	time.Sleep(offset) // synctest's clock starts on a minute
	return tpmLoad(t, vendorsim.Rules{Window: window}, 5, 500, 100, run)
}

// TestCalendarWindowVendor runs the fleet against a vendor that counts
// its TPM per calendar minute, from 5, 23 or 47 s into a minute to the end of the
// third, less 2 s for the last calls to finish (so that the allowance is
// three minutes' limits), with a full
// bucket. The bucket's burst and its refill both land in the first
// minute, which holds one limit: without reading the vendor's reset
// as the minute's end, the calls refilled after the burst drew 429s until
// one's retry-after cooled the dimension down. The same load against a
// vendor that refills continuously is the control: it must not be held
// back.
func TestCalendarWindowVendor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window vendorsim.Window
	}{
		{"calendar minute", vendorsim.WindowFixed},
		{"continuous bucket", vendorsim.WindowTokenBucket},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, offset := range []time.Duration{5 * time.Second, 23 * time.Second, 47 * time.Second} {
				t.Run(offset.String(), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						r := windowLoad(t, tc.window, offset, 3*time.Minute-offset-2*time.Second)
						t.Logf("%s from %v into a minute: %d admitted, %d rate-limited, %.1f %% of the vendor's TPM allowance", tc.name, offset, r.admitted, r.limited, 100*r.use)
						if r.limited != 0 {
							t.Errorf("from %v into a minute: 429s: %d, want 0", offset, r.limited)
						}
						if r.use < 0.95 {
							t.Errorf("from %v into a minute: use %.1f %%, want at least 95 %%", offset, 100*r.use)
						}
					})
				})
			}
		})
	}
}

// TestCalendarWindowFirstContact runs 8 workers of 3,000-token prompts
// against an Anthropic vendor at 60,000 ITPM that counts per calendar
// minute, for three minutes less 2 s. At full load a bucket's reset and
// a calendar minute's differ by the time spent into the minute, and the
// Reactor believes a calendar count only once two reports name the same
// end beyond the headers' precision (3.2 s at this limit, Anthropic's
// remaining values being rounded to thousands):
// the refill after the opening burst outruns the headroom first, and one
// call draws a 429, 4.3 s in. That first contact is all: no other 429,
// and the three minutes' tokens used.
func TestCalendarWindowFirstContact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const itpm = 60_000
		p, err := vendors.AnthropicProfile(vendors.AnthropicLimits{RPM: 10_000, InputTPM: itpm, OutputTPM: 10_000_000})
		if err != nil {
			t.Fatal(err)
		}
		sim := vendorsim.Config{Vendor: vendorsim.Anthropic, Seed: 5, Rules: vendorsim.Rules{Window: vendorsim.WindowFixed},
			Limits:           vendorsim.Limits{RPM: 10_000, ITPM: itpm, OTPM: 10_000_000},
			TimeToFirstToken: vendorsim.Uniform(0.2, 0.6), PerOutputToken: vendorsim.Fixed(0.005)}
		e := newEnvClock(t, sim, p, nil)
		ac := anthropicClient(e, 0)
		params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(strings.Repeat("lorem ", 2000)))}}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute-2*time.Second)
		defer cancel()
		runWorkers(ctx, 8, func(ctx context.Context) error {
			_, err := ac.Messages.New(ctx, params, aoption.WithHeader(vendorsim.HeaderOutputTokens, "50"))
			return err
		})
		st := e.sim.Stats()
		ms, _ := st.Metric(vendorsim.MetricInputTokens)
		use := float64(ms.Counted) / float64(ms.Allowance)
		t.Logf("%d admitted, %d rate-limited, %.1f %% of the vendor's ITPM allowance", st.Admitted, st.RateLimited, 100*use)
		if st.RateLimited > 1 {
			t.Errorf("429s: %d, want at most the first contact's 1", st.RateLimited)
		}
		if use < 0.95 {
			t.Errorf("use %.1f %%, want at least 95 %%", 100*use)
		}
	})
}
