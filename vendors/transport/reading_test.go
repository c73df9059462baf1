package transport_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// readingRun is the outcome of one readingLoad.
type readingRun struct {
	admitted, limited int64
	use               float64 // the vendor's TPM counted over its allowance
}

// readingLoad runs 8 workers for 3 minutes of virtual time through the
// transport against an OpenAI simulator at 30,000 TPM that keeps its
// admission charge, each call a prompt of promptTokens with max_tokens
// maxTokens producing 100 tokens over about a second. The Reactor syncs
// and follows the headers, as by default. opts build the profile.
func readingLoad(t *testing.T, promptTokens int, maxTokens int64, opts ...vendors.ProfileOption) readingRun {
	t.Helper()
	return tpmLoad(t, vendorsim.Rules{Reading: vendorsim.AdmissionKept}, 3, promptTokens, maxTokens, 3*time.Minute, opts...)
}

// tpmLoad runs 8 workers for run (virtual time) through the transport
// against an OpenAI simulator at 30,000 TPM playing rules (its draws
// seeded with seed), each call a prompt of promptTokens with max_tokens
// maxTokens producing 100 tokens over about a second. opts build the
// profile.
func tpmLoad(t *testing.T, rules vendorsim.Rules, seed uint64, promptTokens int, maxTokens int64, run time.Duration, opts ...vendors.ProfileOption) readingRun {
	t.Helper()
	const tpm = 30_000
	p, err := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 10_000, TPM: tpm}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	sim := vendorsim.Config{Vendor: vendorsim.OpenAI, Seed: seed, Rules: rules,
		Limits:           vendorsim.Limits{RPM: 10_000, TPM: tpm},
		TimeToFirstToken: vendorsim.Uniform(0.2, 0.6), PerOutputToken: vendorsim.Fixed(0.005)}
	e := newEnvClock(t, sim, p, nil)
	oc := openAIClient(e, 0)
	words := strings.Repeat("lorem ", promptTokens*4/6+1)[:promptTokens*4]
	params := openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(maxTokens),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(words)}}
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	runWorkers(ctx, 8, func(ctx context.Context) error {
		_, err := oc.Chat.Completions.New(ctx, params, option.WithHeader(vendorsim.HeaderOutputTokens, "100"))
		return err
	})
	st := e.sim.Stats()
	ms, _ := st.Metric(vendorsim.MetricTokens)
	return readingRun{admitted: st.Admitted, limited: st.RateLimited, use: float64(ms.Counted) / float64(ms.Allowance)}
}

// TestAdmissionKeptVendor runs short prompts with a large max_tokens
// against a vendor that keeps its admission charge. Read as adjusted to
// usage, Sluice gives back at settlement tokens the vendor still counts,
// and calls draw 429s; with the default reading (admission kept) none
// does.
func TestAdmissionKeptVendor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []vendors.ProfileOption
		want429 bool
	}{
		{"adjusted to usage", []vendors.ProfileOption{vendors.WithCostReading(vendors.AdjustedToUsage)}, true},
		{"default: admission kept", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := readingLoad(t, 8, 2000, tc.opts...)
				t.Logf("%s: %d admitted, %d rate-limited, %.1f %% of the vendor's TPM allowance", tc.name, r.admitted, r.limited, 100*r.use)
				if got := r.limited > 0; got != tc.want429 {
					t.Errorf("429s: %d, want any: %v", r.limited, tc.want429)
				}
				if !tc.want429 && r.use < 0.95 {
					t.Errorf("use %.1f %%, want at least 95 %%", 100*r.use)
				}
			})
		})
	}
}

// TestAdmissionKeptLongPrompts runs long prompts (4,000 tokens, max_tokens
// 200) against the same vendor: the admission charge is the prompt
// estimate, the vendor keeps it, and Sluice settles to prompt + output
// (100 more) under either reading, so the default reading uses as much
// of the allowance as the adjusted one, with no 429.
func TestAdmissionKeptLongPrompts(t *testing.T) {
	var use [2]float64
	for i, tc := range []struct {
		name string
		opts []vendors.ProfileOption
	}{
		{"adjusted to usage", []vendors.ProfileOption{vendors.WithCostReading(vendors.AdjustedToUsage)}},
		{"default: admission kept", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := readingLoad(t, 4000, 200, tc.opts...)
				t.Logf("long prompts, %s: %d admitted, %d rate-limited, %.1f %% of the vendor's TPM allowance", tc.name, r.admitted, r.limited, 100*r.use)
				if r.limited != 0 {
					t.Errorf("429s: %d, want 0", r.limited)
				}
				if r.use < 0.9 {
					t.Errorf("use %.1f %%, want at least 90 %%", 100*r.use)
				}
				use[i] = r.use
			})
		})
	}
	if use[1] < use[0] {
		t.Errorf("the default reading used %.1f %%, less than the adjusted one's %.1f %%", 100*use[1], 100*use[0])
	}
}

// TestDriftStats shows the drift between Sluice's balance and the
// vendor's remaining tokens: a vendor keeping its admission charge and a
// profile reading it as adjusted leaves Sluice believing it has the
// refunded tokens, which the next response's headers show; with the
// default reading Sluice never believes more than the vendor reports.
func TestDriftStats(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []vendors.ProfileOption
		wantAhead bool
	}{
		{"adjusted to usage", []vendors.ProfileOption{vendors.WithCostReading(vendors.AdjustedToUsage)}, true},
		{"default: admission kept", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, err := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 600, TPM: 100_000}, append([]vendors.ProfileOption{vendors.WithHeadroom(0)}, tc.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				e := newEnv(t, vendorsim.Config{Vendor: vendorsim.OpenAI, Rules: vendorsim.Rules{Reading: vendorsim.AdmissionKept},
					Limits: vendorsim.Limits{RPM: 600, TPM: 100_000}}, p)
				oc := openAIClient(e, 0)
				for range 2 {
					if _, err := oc.Chat.Completions.New(testCtx(t), chat(1000), outputSeven); err != nil {
						t.Fatal(err)
					}
				}
				// The second response reports 100,000 − 2,000 remaining, both
				// admission charges kept. Read as adjusted, Sluice had settled
				// the first call to 3 + 7 and charged the second 1,000: it
				// believed 990 more than the vendor.
				d := e.tr.Drift()[waitTPM]
				ev := lastEvent(t, e)
				t.Logf("%s: %+v; last event %+v", tc.name, d, ev.Reaction.Drift)
				if d.Samples != 2 {
					t.Errorf("%d samples, want 2", d.Samples)
				}
				if got := d.Ahead > 0; got != tc.wantAhead {
					t.Errorf("ahead %d times (max %d), want any: %v", d.Ahead, d.Max, tc.wantAhead)
				}
				if tc.wantAhead && d.Last != 990 {
					t.Errorf("last drift %d, want 990", d.Last)
				}
				if st := e.tr.Stats(); st.DriftSamples < 2 || (st.DriftAhead > 0) != tc.wantAhead {
					t.Errorf("stats: %d samples, %d ahead", st.DriftSamples, st.DriftAhead)
				}
				if len(ev.Reaction.Drift) == 0 {
					t.Error("the event reports no drift")
				}
			})
		})
	}
}
