package vendors

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// The stretched windows of the default 2 % headroom: 60 s / 0.98 and
// 24 h / 0.98, rounded up to the millisecond.
const (
	minute98 = 61_225 * time.Millisecond
	day98    = 88_163_266 * time.Millisecond
)

func rate(typ bucket.LimitType, capacity, amount int64, per time.Duration) bucket.Config {
	return bucket.Config{Type: typ, Capacity: capacity, RefillAmount: amount, RefillPeriod: per}
}

type profileCase struct {
	name  string
	build func() (Profile, error)
	want  []store.Bucket
}

// runProfileCases builds each case and compares its buckets with want.
func runProfileCases(t *testing.T, cases []profileCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Buckets(); !reflect.DeepEqual(got, c.want) {
				t.Errorf("buckets:\n got %+v\nwant %+v", got, c.want)
			}
			for _, d := range p.Dimensions {
				if got, ok := p.Dimension(d.Metric); !ok || got != d.Name {
					t.Errorf("Dimension(%s) = %q, %v; want %q", d.Metric, got, ok, d.Name)
				}
			}
		})
	}
}

func TestProfileErrors(t *testing.T) {
	for _, c := range []struct {
		name        string
		build       func() (Profile, error)
		field, want string
	}{
		{"negative limit", func() (Profile, error) { return OpenAIProfile(OpenAILimits{RPM: -5}) }, "rpm", `"-5": must be between 1 and 10^12`},
		{"too large", func() (Profile, error) { return AnthropicProfile(AnthropicLimits{InputTPM: 2e12}) }, "input_tpm", `"2000000000000"`},
		{"no limit", func() (Profile, error) { return OpenAIProfile(OpenAILimits{Model: "gpt-4o"}) }, "rpm, tpm, rpd, tpd", "no limit given"},
		{"headroom above half", func() (Profile, error) { return OpenAIProfile(OpenAILimits{RPM: 5}, WithHeadroom(0.7)) }, "headroom", `"0.7": must be between 0 and 0.5`},
		{"headroom negative", func() (Profile, error) { return GroqProfile(GroqLimits{RPM: 5}, WithHeadroom(-0.01)) }, "headroom", `"-0.01"`},
		{"model with #", func() (Profile, error) { return OpenAIProfile(OpenAILimits{Model: "a#b", RPM: 5}) }, "model", `"a#b": must be a name without '#'`},
		{"deployment with spaces", func() (Profile, error) { return AzureProfile(AzureLimits{Deployment: " d", TPM: 5000}) }, "deployment", `" d"`},
		{"burst above the vendor's", func() (Profile, error) {
			return OpenAIProfile(OpenAILimits{RPM: 500}, WithBurst(Requests, 9))
		}, "burst[rpm]", `"9": must be between 1 and 8, the vendor's own burst for 500 per minute`},
		{"burst zero", func() (Profile, error) { return OpenAIProfile(OpenAILimits{TPM: 500}, WithBurst(Tokens, 0)) }, "burst[tpm]", `"0"`},
		{"burst on a missing dimension", func() (Profile, error) {
			return OpenAIProfile(OpenAILimits{RPM: 500}, WithBurst(Tokens, 10))
		}, "burst[tpm]", "the openai profile has no tpm dimension"},
		{"azure burst fills the minute", func() (Profile, error) {
			return AzureProfile(AzureLimits{TPM: 30_000}, WithBurst(Tokens, 29_400))
		}, "burst[tpm]", "must be between 1 and 29399: capacity plus refill may not exceed 29400 of the 30000 per calendar minute"},
		{"azure rpm burst", func() (Profile, error) {
			return AzureProfile(AzureLimits{TPM: 30_000}, WithBurst(Requests, 3))
		}, "burst[rpm]", "Azure admits at most 3 requests in a calendar second for 180 RPM"},
		{"azure tpm too small for an rpm", func() (Profile, error) { return AzureProfile(AzureLimits{TPM: 100}) }, "tpm", "6 RPM per 1000 TPM"},
		{"gemini rpd of one", func() (Profile, error) { return GeminiProfile(GeminiLimits{RPD: 1}) }, "rpd", "too small for a fixed window"},
		{"unknown plan", func() (Profile, error) {
			return ElevenLabsProfile(ElevenLabsLimits{Plan: "enterprise", Family: ElevenLabsSTT})
		}, "plan", `"enterprise": unknown plan (want free, starter, creator, pro, scale, business)`},
		{"unknown family", func() (Profile, error) {
			return ElevenLabsProfile(ElevenLabsLimits{Plan: ElevenLabsPro, Family: "music"})
		}, "family", `"music": unknown model family (want multilingual_v2, flash_turbo, stt)`},
		{"plan without family", func() (Profile, error) { return ElevenLabsProfile(ElevenLabsLimits{Plan: ElevenLabsPro}) }, "family", "required with a plan"},
		{"plan and number", func() (Profile, error) {
			return ElevenLabsProfile(ElevenLabsLimits{Plan: ElevenLabsPro, Family: ElevenLabsSTT, Concurrent: 3})
		}, "concurrent", "either a plan (pro) or a number"},
		{"more slots than the vendor", func() (Profile, error) {
			return ElevenLabsProfile(ElevenLabsLimits{Concurrent: 3}, WithBurst(Concurrent, 4))
		}, "burst[concurrent]", "between 1 and the vendor's 3 slots"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := c.build()
			var fe *bucket.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, bucket.ErrInvalid) {
				t.Fatalf("got %v (profile %+v), want a *bucket.FieldError", err, p)
			}
			if fe.Field != c.field || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got field %q, error %q; want field %q and %q", fe.Field, err, c.field, c.want)
			}
		})
	}
}

func TestDimensionUnknownMetric(t *testing.T) {
	p, err := AnthropicProfile(AnthropicLimits{RPM: 50, InputTPM: 40_000})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m    Metric
		name string
		ok   bool
	}{
		{Requests, "anthropic#rpm", true},
		{InputTokens, "anthropic#input_tpm", true},
		{OutputTokens, "", false}, // not configured
		{Tokens, "", false},       // Anthropic's combined header, no dimension
	} {
		if got, ok := p.Dimension(c.m); got != c.name || ok != c.ok {
			t.Errorf("Dimension(%s) = %q, %v; want %q, %v", c.m, got, ok, c.name, c.ok)
		}
	}
}

func TestSuffixRoundTrip(t *testing.T) {
	for _, m := range []Metric{Requests, Tokens, InputTokens, OutputTokens, RequestsPerDay, TokensPerDay, Concurrent} {
		got, ok := MetricOf(Suffix(m))
		if !ok || got != m {
			t.Errorf("MetricOf(Suffix(%s)) = %s, %v", m, got, ok)
		}
	}
	if s := Suffix("bogus"); s != "" {
		t.Errorf("Suffix(bogus) = %q", s)
	}
	if _, ok := MetricOf("rph"); ok {
		t.Error("MetricOf(rph) found a metric")
	}
}
