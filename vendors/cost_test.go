package vendors

import (
	"errors"
	"reflect"
	"testing"

	"github.com/ontopix/sluice/bucket"
)

func ch(m Metric, dim string, n int64) Charge { return Charge{Metric: m, Dimension: dim, Amount: n} }

func TestCostAdmission(t *testing.T) {
	for _, c := range []struct {
		name  string
		model CostModel
		call  Call
		want  []Charge
	}{
		{"openai: max_tokens above the estimate", OpenAICost(), Call{InputTokens: 300, MaxOutputTokens: 1000},
			[]Charge{{Requests, "", 1}, {Tokens, "", 1000}, {RequestsPerDay, "", 1}, {TokensPerDay, "", 1000}}},
		{"openai: the estimate above max_tokens", OpenAICost(), Call{InputTokens: 300, MaxOutputTokens: 100},
			[]Charge{{Requests, "", 1}, {Tokens, "", 300}, {RequestsPerDay, "", 1}, {TokensPerDay, "", 300}}},
		{"openai: characters, ceil(chars/4)", OpenAICost(), Call{Characters: 1001},
			[]Charge{{Requests, "", 1}, {Tokens, "", 251}, {RequestsPerDay, "", 1}, {TokensPerDay, "", 251}}},
		{"openai: n completions", OpenAICost(), Call{InputTokens: 300, MaxOutputTokens: 200, N: 3},
			[]Charge{{Requests, "", 1}, {Tokens, "", 600}, {RequestsPerDay, "", 1}, {TokensPerDay, "", 600}}},
		{"openai: nothing known still charges 1", OpenAICost(), Call{},
			[]Charge{{Requests, "", 1}, {Tokens, "", 1}, {RequestsPerDay, "", 1}, {TokensPerDay, "", 1}}},
		{"anthropic: output estimate, not max_tokens", AnthropicCost(), Call{InputTokens: 2000, MaxOutputTokens: 8192, OutputEstimate: 500},
			[]Charge{{Requests, "", 1}, {InputTokens, "", 2000}, {OutputTokens, "", 500}}},
		{"anthropic: no output estimate asks a positive balance", AnthropicCost(), Call{InputTokens: 2000, MaxOutputTokens: 8192},
			[]Charge{{Requests, "", 1}, {InputTokens, "", 2000}, {OutputTokens, "", 1}}},
		{"azure: prompt + max_tokens × best_of", AzureCost(), Call{InputTokens: 500, MaxOutputTokens: 1000, N: 3},
			[]Charge{{Requests, "", 1}, {Tokens, "", 3500}}},
		{"gemini: input only", GeminiCost(), Call{InputTokens: 700, MaxOutputTokens: 8000},
			[]Charge{{Requests, "", 1}, {Tokens, "", 700}, {RequestsPerDay, "", 1}}},
		{"groq: output reserved as max_tokens × n", GroqCost(), Call{InputTokens: 700, MaxOutputTokens: 100, N: 2},
			[]Charge{{Requests, "", 1}, {Tokens, "", 700}, {InputTokens, "", 700}, {OutputTokens, "", 200}, {RequestsPerDay, "", 1}, {TokensPerDay, "", 700}}},
		{"groq: no cap, the output estimate", GroqCost(), Call{InputTokens: 10, OutputEstimate: 40},
			[]Charge{{Requests, "", 1}, {Tokens, "", 10}, {InputTokens, "", 10}, {OutputTokens, "", 40}, {RequestsPerDay, "", 1}, {TokensPerDay, "", 10}}},
		{"elevenlabs: a slot", ElevenLabsCost(), Call{Characters: 5000},
			[]Charge{{Concurrent, "", 1}}},
		{"saturates, no overflow", AzureCost(), Call{InputTokens: 1 << 62, MaxOutputTokens: 1 << 62, N: 4},
			[]Charge{{Requests, "", 1}, {Tokens, "", 1<<63 - 1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.model.Admission(c.call)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestCostSettle(t *testing.T) {
	u := Usage{Input: 1200, Output: 300, CacheCreation: 100, CacheRead: 800}
	for _, c := range []struct {
		name     string
		model    CostModel
		admitted []Charge
		usage    Usage
		want     []Charge
	}{
		{"openai: prompt + completion, cached included", OpenAICost(), nil, u,
			[]Charge{{Tokens, "", 1500}, {TokensPerDay, "", 1500}}},
		{"groq: cached tokens excluded", GroqCost(), nil, u,
			[]Charge{{Tokens, "", 700}, {InputTokens, "", 400}, {OutputTokens, "", 300}, {TokensPerDay, "", 700}}},
		{"anthropic: input + cache creation, reads excluded", AnthropicCost(), nil, u,
			[]Charge{{InputTokens, "", 1300}, {OutputTokens, "", 300}}},
		{"azure: never refunded", AzureCost(), []Charge{{Requests, "", 1}, {Tokens, "", 3500}}, u,
			[]Charge{{Tokens, "", 3500}}},
		{"azure: charges more when usage exceeds the charge", AzureCost(), []Charge{{Tokens, "", 1000}}, u,
			[]Charge{{Tokens, "", 1500}}},
		{"gemini: input", GeminiCost(), nil, u, []Charge{{Tokens, "", 1200}}},
		{"elevenlabs: nothing to settle", ElevenLabsCost(), nil, u, nil},
		{"groq: cache above input clamps at zero", GroqCost(), nil, Usage{Input: 5, CacheRead: 9},
			[]Charge{{Tokens, "", 0}, {InputTokens, "", 0}, {OutputTokens, "", 0}, {TokensPerDay, "", 0}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.model.Settle(c.admitted, c.usage)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestCostBadInput(t *testing.T) {
	for _, c := range []struct {
		name  string
		err   func() error
		field string
	}{
		{"negative input", func() error { _, err := OpenAICost().Admission(Call{InputTokens: -1}); return err }, "input_tokens"},
		{"negative n", func() error { _, err := AzureCost().Admission(Call{N: -2}); return err }, "n"},
		{"negative output", func() error { _, err := OpenAICost().Settle(nil, Usage{Output: -1}); return err }, "usage.output"},
		{"unknown admission rule", func() error {
			_, err := CostModel{Metrics: []MetricCost{{Tokens, 0, SettleInput, AdjustedToUsage}}}.Admission(Call{})
			return err
		}, "admit"},
		{"unknown settlement rule", func() error {
			_, err := CostModel{Metrics: []MetricCost{{Tokens, AdmitInput, 99, AdjustedToUsage}}}.Settle(nil, Usage{})
			return err
		}, "settle"},
	} {
		var fe *bucket.FieldError
		if err := c.err(); !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: got %v, want a *bucket.FieldError on %s", c.name, err, c.field)
		}
	}
}

// TestProfileChargesNamed checks that a profile names each charge's
// dimension, keeps only the dimensions it has, and lowers an output
// estimate above the OTPM capacity to it.
func TestProfileChargesNamed(t *testing.T) {
	p, err := AnthropicProfile(AnthropicLimits{Model: "claude", RPM: 50, InputTPM: 40_000, OutputTPM: 8_000})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Admission(Call{InputTokens: 3000, OutputEstimate: 50_000, MaxOutputTokens: 64_000})
	if err != nil {
		t.Fatal(err)
	}
	want := []Charge{
		ch(Requests, "anthropic#claude#rpm", 1),
		ch(InputTokens, "anthropic#claude#input_tpm", 3000),
		ch(OutputTokens, "anthropic#claude#output_tpm", 7840), // the capacity, not 50000
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("admission: got %v, want %v", got, want)
	}
	settled, err := p.Settle(got, Usage{Input: 2900, CacheCreation: 200, CacheRead: 10_000, Output: 612})
	if err != nil {
		t.Fatal(err)
	}
	want = []Charge{ch(InputTokens, "anthropic#claude#input_tpm", 3100), ch(OutputTokens, "anthropic#claude#output_tpm", 612)}
	if !reflect.DeepEqual(settled, want) {
		t.Errorf("settle: got %v, want %v", settled, want)
	}

	o, err := OpenAIProfile(OpenAILimits{RPM: 500, TPM: 30_000}) // no daily dimensions
	if err != nil {
		t.Fatal(err)
	}
	got, err = o.Admission(Call{InputTokens: 100, MaxOutputTokens: 40_000})
	if err != nil {
		t.Fatal(err)
	}
	want = []Charge{ch(Requests, "openai#rpm", 1), ch(Tokens, "openai#tpm", 40_000)} // above capacity: the store refuses it
	if !reflect.DeepEqual(got, want) {
		t.Errorf("openai admission: got %v, want %v", got, want)
	}
	if _, err := o.Admission(Call{Characters: -1}); err == nil {
		t.Error("negative characters accepted")
	}
	if _, err := o.Settle(nil, Usage{CacheRead: -1}); err == nil {
		t.Error("negative cache read accepted")
	}
}

func TestRuleStrings(t *testing.T) {
	for _, r := range []AdmitRule{AdmitOne, AdmitMaxOutputOrInput, AdmitInput, AdmitInputPlusMaxOutput, AdmitOutputEstimate, AdmitMaxOutput} {
		if s := r.String(); s == "" || s[0] == 'A' {
			t.Errorf("AdmitRule(%d) = %q", r, s)
		}
	}
	for _, r := range []SettleRule{SettleNever, SettleInputOutput, SettleUncachedInputOutput, SettleInputCacheCreation, SettleOutput, SettleInput, SettleUncachedInput, SettleChargeMore} {
		if s := r.String(); s == "" || s[0] == 'S' {
			t.Errorf("SettleRule(%d) = %q", r, s)
		}
	}
	for _, k := range []RuleKind{ContinuousBucket, FixedWindow, Concurrency} {
		if s := k.String(); s == "" || s[0] == 'R' {
			t.Errorf("RuleKind(%d) = %q", k, s)
		}
	}
}
