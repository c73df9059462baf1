package transport_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// requestsRun is the outcome of one requestsLoad.
type requestsRun struct {
	admitted, limited int64
	use               float64 // the vendor's requests counted over their allowance
}

// requestsLoad runs 16 workers for 3 minutes of virtual time through the
// transport against an OpenAI simulator at 600 RPM whose per-minute
// limits follow window (requests counted in each second), with small
// calls, so that the request limit binds; the first 2 s of every 10 the
// whole fleet pauses, and the bucket refills its burst.
func requestsLoad(t *testing.T, vendor vendorsim.Vendor, window vendorsim.Window) requestsRun {
	t.Helper()
	return requestsLoadJitter(t, vendor, window, vendorsim.Dist{})
}

// requestsLoadJitter is requestsLoad with requests reaching the vendor's
// counters after an arrival jitter drawn from jitter.
func requestsLoadJitter(t *testing.T, vendor vendorsim.Vendor, window vendorsim.Window, jitter vendorsim.Dist) requestsRun {
	t.Helper()
	const rpm, run = 600, 3 * time.Minute
	sim := vendorsim.Config{Vendor: vendor, Seed: 7, Rules: vendorsim.Rules{Window: window}, ArrivalJitter: jitter,
		TimeToFirstToken: vendorsim.Uniform(0.2, 0.6), PerOutputToken: vendorsim.Fixed(0.001)}
	var p vendors.Profile
	var err error
	var call func(ctx context.Context) error
	var e *env
	if vendor == vendorsim.Anthropic {
		sim.Limits = vendorsim.Limits{RPM: rpm, ITPM: 10_000_000, OTPM: 10_000_000}
		p, err = vendors.AnthropicProfile(vendors.AnthropicLimits{RPM: rpm, InputTPM: 10_000_000, OutputTPM: 10_000_000})
		if err != nil {
			t.Fatal(err)
		}
		e = newEnvClock(t, sim, p, nil)
		ac := anthropicClient(e, 0)
		call = func(ctx context.Context) error {
			_, err := ac.Messages.New(ctx, messageParams(20), aoption.WithHeader(vendorsim.HeaderOutputTokens, "10"))
			return err
		}
	} else {
		sim.Limits = vendorsim.Limits{RPM: rpm, TPM: 10_000_000}
		p, err = vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: rpm, TPM: 10_000_000})
		if err != nil {
			t.Fatal(err)
		}
		e = newEnvClock(t, sim, p, nil)
		oc := openAIClient(e, 0)
		params := openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(20),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}
		call = func(ctx context.Context) error {
			_, err := oc.Chat.Completions.New(ctx, params, option.WithHeader(vendorsim.HeaderOutputTokens, "10"))
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	start := time.Now()
	runWorkers(ctx, 16, func(ctx context.Context) error {
		if in := time.Since(start) % (10 * time.Second); in < 2*time.Second {
			time.Sleep(2*time.Second - in) // the fleet pauses: the bucket refills its burst
		}
		return call(ctx)
	})
	st := e.sim.Stats()
	ms, _ := st.Metric(vendorsim.MetricRequests)
	return requestsRun{admitted: st.Admitted, limited: st.RateLimited, use: float64(ms.Counted) / float64(ms.Allowance)}
}

// TestRequestsCountedPerSecond runs calls whose request limit binds
// against a vendor that counts its requests per calendar second, or over
// the last second, rather than in a bucket holding a second's worth. The
// profile's bucket, built for the bucket, can grant its burst and a
// second's refill within one second, after every pause (18 429s in the
// run); the first 429 naming requests cuts its burst, and the rest of the
// run draws none. The vendor's own reading is the control.
func TestRequestsCountedPerSecond(t *testing.T) {
	for _, tc := range []struct {
		name   string
		vendor vendorsim.Vendor
		window vendorsim.Window
		max429 int64
		minUse float64
	}{
		// A count per second loses the limits of the seconds the fleet
		// pauses (a fifth of them), and the cut bucket refills 82 % of
		// the vendor's 10 a second (it keeps the profile's room for
		// arrival jitter): 77 % is all of the rest.
		{"OpenAI, calendar second", vendorsim.OpenAI, vendorsim.WindowFixed, 3, 0.75},
		{"OpenAI, sliding second", vendorsim.OpenAI, vendorsim.WindowSliding, 3, 0.75},
		{"OpenAI, continuous bucket", vendorsim.OpenAI, vendorsim.WindowVendor, 0, 0.95},
		{"Anthropic, calendar second", vendorsim.Anthropic, vendorsim.WindowFixed, 3, 0.75},
		{"Anthropic, sliding second", vendorsim.Anthropic, vendorsim.WindowSliding, 3, 0.75},
		{"Anthropic, continuous bucket", vendorsim.Anthropic, vendorsim.WindowVendor, 0, 0.95},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := requestsLoad(t, tc.vendor, tc.window)
				t.Logf("%s: %d admitted, %d rate-limited, %.1f %% of the vendor's request allowance", tc.name, r.admitted, r.limited, 100*r.use)
				if r.limited > tc.max429 {
					t.Errorf("429s: %d, want at most %d", r.limited, tc.max429)
				}
				if r.use < tc.minUse {
					t.Errorf("use %.1f %%, want at least %.0f %%", 100*r.use, 100*tc.minUse)
				}
			})
		})
	}
}

// TestArrivalJitterWidensTheCut runs the load of
// TestRequestsCountedPerSecond against a vendor counting over the last
// second, with requests reaching its counters 0–400 ms after it receives
// them: four times the room for arrival jitter the cut keeps at 600 RPM.
// With the room fixed, the run drew 28 429s (OpenAI) and 24 (Anthropic);
// each 429 on requests while the cut is in place widens the room, and the
// run draws at most 12, at the rate the jitter leaves (with the room at
// 400 ms, 9 requests in 1.4 s: 64 % of the limit).
func TestArrivalJitterWidensTheCut(t *testing.T) {
	for _, vendor := range []vendorsim.Vendor{vendorsim.OpenAI, vendorsim.Anthropic} {
		t.Run(string(vendor), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := requestsLoadJitter(t, vendor, vendorsim.WindowSliding, vendorsim.Uniform(0, 0.4))
				t.Logf("%s: %d admitted, %d rate-limited, %.1f %% of the vendor's request allowance", vendor, r.admitted, r.limited, 100*r.use)
				if r.limited > 12 {
					t.Errorf("429s: %d, want at most 12", r.limited)
				}
				if r.use < 0.6 {
					t.Errorf("use %.1f %%, want at least 60 %%", 100*r.use)
				}
			})
		})
	}
}
