package transport_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// otpmSigma is the spread of the outputs otpmLoad draws.
const otpmSigma = 0.6

// otpmRun is the outcome of one otpmLoad.
type otpmRun struct {
	admitted, limited int64
	use               float64 // OTPM counted over its allowance
	meanWait          time.Duration
}

// otpmLoadStream runs workers for run (virtual time) through the
// transport against Anthropic with an 8,000 OTPM limit, every call asking
// max_tokens 1024 and producing a log-normal output (median tokens,
// spread otpmSigma) at 10 ms a token, streamed when stream is set (the
// vendor then counts the output as it is produced); opts configure the
// Transport.
func otpmLoadStream(t *testing.T, workers int, run time.Duration, median float64, stream bool, opts ...transport.Option) otpmRun {
	t.Helper()
	const otpm = 8000
	p, err := vendors.AnthropicProfile(vendors.AnthropicLimits{RPM: 4000, InputTPM: 10_000_000, OutputTPM: otpm})
	if err != nil {
		t.Fatal(err)
	}
	sim := vendorsim.Config{Vendor: vendorsim.Anthropic, Seed: 11,
		Limits:           vendorsim.Limits{RPM: 4000, ITPM: 10_000_000, OTPM: otpm},
		OutputTokens:     vendorsim.LogNormal(median, otpmSigma),
		TimeToFirstToken: vendorsim.Uniform(0.2, 0.6), PerOutputToken: vendorsim.Fixed(0.01)}
	e := newEnvClock(t, sim, p, nil, opts...)
	ac := anthropicClient(e, 0)
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello there"))}}
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	runWorkers(ctx, workers, func(ctx context.Context) error {
		if stream {
			s := ac.Messages.NewStreaming(ctx, params)
			for s.Next() {
			}
			return s.Err()
		}
		_, err := ac.Messages.New(ctx, params)
		return err
	})
	st := e.sim.Stats()
	ms, _ := st.Metric(vendorsim.MetricOutputTokens)
	var waited time.Duration
	var n int
	for _, ev := range e.eventList() {
		if ev.Outcome == transport.Settled {
			waited += ev.Waited
			n++
		}
	}
	r := otpmRun{admitted: st.Admitted, limited: st.RateLimited, use: float64(ms.Counted) / float64(ms.Allowance)}
	if n > 0 {
		r.meanWait = waited / time.Duration(n)
	}
	return r
}

// TestLearnedOutputEstimate compares, at an 8,000 OTPM limit with 16
// workers over 15 minutes of virtual time, the fixed output estimate
// (min(max_tokens, 1024)) with the learned one (the 75th percentile of
// recent outputs): the fixed one reserves about four times what calls
// produce, calls wait in line behind reservations mostly refunded, and
// part of the allowance goes unused; the learned one uses at least 95 %
// of it with no 429, whether the responses are streamed (the vendor
// counts output as it is produced) or not.
func TestLearnedOutputEstimate(t *testing.T) {
	fixed := []transport.Option{transport.WithOutputEstimate(transport.FixedOutputEstimate)}
	for _, tc := range []struct {
		name    string
		stream  bool
		opts    []transport.Option
		wantUse float64 // at least
	}{
		{"fixed min(max_tokens, 1024)", false, fixed, 0},
		{"learned p75 (default)", false, nil, 0.95},
		{"streamed, fixed", true, fixed, 0},
		{"streamed, learned p75 (default)", true, nil, 0.95},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := otpmLoadStream(t, 16, 15*time.Minute, 200, tc.stream, tc.opts...)
				t.Logf("%s: %d admitted, %d rate-limited, %.1f %% of the OTPM allowance, mean wait %v", tc.name, r.admitted, r.limited, 100*r.use, r.meanWait)
				if r.limited != 0 {
					t.Errorf("429s: %d, want 0", r.limited)
				}
				if r.use < tc.wantUse {
					t.Errorf("use %.1f %%, want at least %.0f %%", 100*r.use, 100*tc.wantUse)
				}
			})
		})
	}
}
