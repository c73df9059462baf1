package limits

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/vendors"
)

// TestPresetsAreProfiles checks that every preset's buckets are exactly its
// vendor profile's, for the same limits and options.
func TestPresetsAreProfiles(t *testing.T) {
	for _, c := range []struct {
		yaml    string
		profile func() (vendors.Profile, error)
	}{
		{"- preset: openai\n  model: gpt-4o\n  rpm: 500\n  tpm: 30_000\n  rpd: 10000\n  tpd: 900000\n", func() (vendors.Profile, error) {
			return vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 500, TPM: 30_000, RPD: 10_000, TPD: 900_000})
		}},
		{"- preset: anthropic\n  rpm: 50\n  input_tpm: 40000\n  output_tpm: 8000\n  headroom: 5%\n  burst: {input_tpm: 10000}\n", func() (vendors.Profile, error) {
			return vendors.AnthropicProfile(vendors.AnthropicLimits{RPM: 50, InputTPM: 40_000, OutputTPM: 8_000}, vendors.WithHeadroom(0.05), vendors.WithBurst(vendors.InputTokens, 10_000))
		}},
		{"- preset: anthropic\n  rpm: 50\n  request_margin: 100ms\n", func() (vendors.Profile, error) {
			return vendors.AnthropicProfile(vendors.AnthropicLimits{RPM: 50}, vendors.WithRequestMargin(100*time.Millisecond))
		}},
		{"- preset: openai\n  rpm: 500\n  request_margin: 0s\n", func() (vendors.Profile, error) {
			return vendors.OpenAIProfile(vendors.OpenAILimits{RPM: 500}, vendors.WithRequestMargin(0))
		}},
		{"- preset: openai\n  tpm: 30000\n  cost_reading: adjusted_to_usage\n", func() (vendors.Profile, error) {
			return vendors.OpenAIProfile(vendors.OpenAILimits{TPM: 30_000}, vendors.WithCostReading(vendors.AdjustedToUsage))
		}},
		{"- preset: openai\n  tpm: 30000\n  tpd: 900000\n  cost_reading: {tpm: adjusted_to_usage}\n", func() (vendors.Profile, error) {
			return vendors.OpenAIProfile(vendors.OpenAILimits{TPM: 30_000, TPD: 900_000}, vendors.WithCostReading(vendors.AdjustedToUsage, vendors.Tokens))
		}},
		{"- preset: anthropic\n  output_tpm: 8000\n  cost_reading: {output_tpm: admission_kept}\n", func() (vendors.Profile, error) {
			return vendors.AnthropicProfile(vendors.AnthropicLimits{OutputTPM: 8000}, vendors.WithCostReading(vendors.AdmissionKept, vendors.OutputTokens))
		}},
		{"- preset: azure\n  deployment: gpt-4o-eu\n  tpm: 30000\n", func() (vendors.Profile, error) {
			return vendors.AzureProfile(vendors.AzureLimits{Deployment: "gpt-4o-eu", TPM: 30_000})
		}},
		{"- preset: azure\n  tpm: 30000\n  rpm: 600\n  headroom: 0.1\n  burst:\n    tpm: 12000\n", func() (vendors.Profile, error) {
			return vendors.AzureProfile(vendors.AzureLimits{TPM: 30_000, RPM: 600}, vendors.WithHeadroom(0.1), vendors.WithBurst(vendors.Tokens, 12_000))
		}},
		{"- preset: gemini\n  model: gemini-2.5-flash\n  rpm: 10\n  tpm: 250000\n  rpd: 250\n", func() (vendors.Profile, error) {
			return vendors.GeminiProfile(vendors.GeminiLimits{Model: "gemini-2.5-flash", RPM: 10, TPM: 250_000, RPD: 250})
		}},
		{"- preset: groq\n  model: llama\n  rpm: 30\n  rpd: 1000\n  tpm: 6000\n  tpd: 500000\n  input_tpm: 5000\n  output_tpm: 2000\n", func() (vendors.Profile, error) {
			return vendors.GroqProfile(vendors.GroqLimits{Model: "llama", RPM: 30, RPD: 1000, TPM: 6000, TPD: 500_000, InputTPM: 5000, OutputTPM: 2000})
		}},
		{"- preset: elevenlabs\n  plan: creator\n  family: stt\n", func() (vendors.Profile, error) {
			return vendors.ElevenLabsProfile(vendors.ElevenLabsLimits{Plan: vendors.ElevenLabsCreator, Family: vendors.ElevenLabsSTT})
		}},
		{"- preset: elevenlabs\n  concurrent: 5\n", func() (vendors.Profile, error) {
			return vendors.ElevenLabsProfile(vendors.ElevenLabsLimits{Concurrent: 5})
		}},
	} {
		f, err := Parse("x.yaml", []byte("presets:\n"+indent(c.yaml)))
		if err != nil {
			t.Errorf("%s: %v", c.yaml, err)
			continue
		}
		p, err := c.profile()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]store.Bucket{}
		for _, b := range p.Buckets() {
			want[b.Name] = b
		}
		got := map[string]store.Bucket{}
		for _, b := range f.Buckets() {
			got[b.Name] = b
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.yaml, got, want)
		}
		if ps := f.Profiles(); len(ps) != 1 || !reflect.DeepEqual(ps[0].Cost, p.Cost) {
			t.Errorf("%s: the file's profiles %+v, want one with the cost model %+v", c.yaml, ps, p.Cost)
		}
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

// TestPresetNamesAndScopes checks the prefix: vendor, a vendor override,
// the preset's scope field and model:, and the line each entry records.
func TestPresetNamesAndScopes(t *testing.T) {
	f, err := Parse("x.yaml", []byte(`presets:
  - preset: elevenlabs
    vendor: elevenlabs-bench
    model: eleven_turbo_v2
    concurrent: 16
  - preset: azure
    deployment: eu
    rpm: 60
  - preset: openai
    headroom: "0.05"
    tpm: 1000
    max_debt: -1
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range f.Entries {
		got = append(got, e.Name+"@"+e.Source+":"+strconv.Itoa(e.Line))
		if e.Name == "openai#tpm" && (e.Config.MaxDebt != -1 || e.Config.Capacity != 950) {
			t.Errorf("openai#tpm: %+v, want capacity 950 (5%% headroom) and no debt", e.Config)
		}
	}
	want := []string{"azure#eu#rpm@preset azure:8", "elevenlabs-bench#eleven_turbo_v2#concurrent@preset elevenlabs:5", "openai#tpm@preset openai:11"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestPresetErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"presets:\n  - preset: openai\n    rpm: 0\n", "x.yaml:3:10: presets[0].rpm: 0: must be between 1 and 10^12"},
		{"presets:\n  - preset: openai\n    rpm: 500\n    headroom: 60%\n", `x.yaml:4:15: presets[0].headroom: "60%": must be a fraction from 0 to 0.5 or a percentage from 0% to 50%`},
		{"presets:\n  - preset: openai\n    rpm: 500\n    headroom: lots\n", `x.yaml:4:15: presets[0].headroom: "lots"`},
		{"presets:\n  - preset: openai\n    rpm: 500\n    request_margin: 11s\n", `x.yaml:4:21: presets[0].request_margin: "11s": must be a duration from 0s to 10s in whole milliseconds`},
		{"presets:\n  - preset: openai\n    rpm: 500\n    request_margin: -1ms\n", `x.yaml:4:21: presets[0].request_margin: "-1ms"`},
		{"presets:\n  - preset: openai\n    rpm: 500\n    request_margin: 1.5ms\n", `x.yaml:4:21: presets[0].request_margin: "1.5ms"`},
		{"presets:\n  - preset: openai\n    tpm: 500\n    cost_reading: kept\n", `x.yaml:4:19: presets[0].cost_reading: "kept": must be adjusted_to_usage or admission_kept`},
		{"presets:\n  - preset: openai\n    tpm: 500\n    cost_reading: {tpm: refunded}\n", `x.yaml:4:25: presets[0].cost_reading.tpm: "refunded": must be adjusted_to_usage or admission_kept`},
		{"presets:\n  - preset: openai\n    tpm: 500\n    cost_reading: {otpm: admission_kept}\n", "x.yaml:4:20: presets[0].cost_reading.otpm: unknown limit for preset openai"},
		{"presets:\n  - preset: openai\n    tpm: 500\n    cost_reading: {rpm: admission_kept}\n", "x.yaml:4:25: presets[0].cost_reading.rpm: admission_kept: rpm is never settled, so it has no reading"},
		{"presets:\n  - preset: openai\n    rpm: 500\n    burst: {rpm: 20}\n", "x.yaml:4:18: presets[0].burst.rpm: 20: must be between 1 and 8, the vendor's own burst for 500 per minute"},
		{"presets:\n  - preset: openai\n    rpm: 500\n    burst: {tpm: 20}\n", "x.yaml:4:18: presets[0].burst.tpm: 20: the openai profile has no tpm dimension"},
		{"presets:\n  - preset: openai\n    rpm: 500\n    burst: {input_tpm: 20}\n", "x.yaml:4:13: presets[0].burst.input_tpm: unknown limit for preset openai (want rpm, tpm, rpd, tpd)"},
		{"presets:\n  - preset: openai\n    rpm: 500\n    burst: 5\n", "x.yaml:4:12: presets[0].burst: must be a mapping of limit to capacity"},
		{"presets:\n  - preset: openai\n    rpm: 500\n    burst: {rpm: x}\n", `x.yaml:4:18: presets[0].burst.rpm: "x": must be a whole number`},
		{"presets:\n  - preset: azure\n    tpm: 30000\n    burst: {tpm: 29400}\n", "x.yaml:4:18: presets[0].burst.tpm: 29400: must be between 1 and 29399"},
		{"presets:\n  - preset: azure\n    tpm: 100\n", "x.yaml:3:10: presets[0].tpm: 100: too small: Azure grants 6 RPM per 1000 TPM"},
		{"presets:\n  - preset: azure\n    deployment: eu\n    model: gpt-4o\n    tpm: 1000\n", "x.yaml:4:5: presets[0].model: give deployment or model, not both"},
		{"presets:\n  - preset: azure\n    deployment: a#b\n    tpm: 1000\n", "x.yaml:3:17: presets[0].deployment: must be a non-empty name without '#'"},
		{"presets:\n  - preset: gemini\n    rpd: 1\n", "x.yaml:3:10: presets[0].rpd: 1: too small for a fixed window"},
		{"presets:\n  - preset: elevenlabs\n    plan: enterprise\n    family: stt\n", `x.yaml:3:11: presets[0].plan: enterprise: unknown plan (want free, starter, creator, pro, scale, business)`},
		{"presets:\n  - preset: elevenlabs\n    plan: pro\n    family: music\n", "x.yaml:4:13: presets[0].family: music: unknown model family"},
		{"presets:\n  - preset: elevenlabs\n    plan: pro\n", "x.yaml:2:5: presets[0]: : required with a plan"},
		{"presets:\n  - preset: elevenlabs\n    plan: pro\n    family: stt\n    concurrent: 3\n", "x.yaml:5:17: presets[0].concurrent: 3: give either a plan (pro) or a number"},
		{"presets:\n  - preset: groq\n    rpm: 5\n    max_debt: -7\n", "x.yaml:4:15: presets[0].max_debt: -7: must be -1 (no debt), 0 (default: capacity) or up to 10^12 tokens"},
		{"presets:\n  - preset: groq\n    tpm: 5000\n    max_debt: 2e12\n", `x.yaml:4:15: presets[0].max_debt: "2e12": must be a whole number`},
		{"presets:\n  - preset: gemini\n    plan: pro\n    rpm: 5\n", "x.yaml:3:5: presets[0].plan: unknown field for preset gemini (want model, vendor, max_debt, headroom, request_margin, cost_reading, burst, rpm, tpm, rpd)"},
		{"presets:\n  - preset: mistral\n    rpm: 5\n", `presets[0].preset: "mistral": unknown preset (want one of anthropic, azure, elevenlabs, gemini, groq, openai)`},
	} {
		_, err := Parse("x.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s", c.yaml, err, c.want)
		}
	}
}

func TestParseHeadroom(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0.05", 0.05, true}, {"5%", 0.05, true}, {" 5 % ", 0.05, true}, {"0", 0, true}, {"0%", 0, true},
		{"50%", 0.5, true}, {"0.5", 0.5, true}, {"51%", 0, false}, {"-1%", 0, false}, {"NaN", 0, false},
		{"", 0, false}, {"%", 0, false}, {"1e-2", 0.01, true},
	} {
		got, err := ParseHeadroom(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseHeadroom(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
}
