package vendors

import (
	"errors"
	"reflect"
	"testing"

	"github.com/ontopix/sluice/bucket"
)

// TestReadingSettle shows the two readings of a call whose admission
// charge (max_tokens 4000) exceeds its usage (1,500), and of one whose
// usage exceeds it.
func TestReadingSettle(t *testing.T) {
	u := Usage{Input: 1200, Output: 300}
	adjusted, err := OpenAICost().WithReading(AdjustedToUsage)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		model    CostModel
		admitted int64
		want     int64
	}{
		{"openai default (admission kept): never below the charge", OpenAICost(), 4000, 4000},
		{"openai default: raised to a larger usage", OpenAICost(), 1000, 1500},
		{"openai adjusted to usage: refunded", adjusted, 4000, 1500},
		{"openai adjusted to usage: raised", adjusted, 1000, 1500},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.model.Settle([]Charge{{Tokens, "", c.admitted}, {TokensPerDay, "", c.admitted}}, u)
			if err != nil {
				t.Fatal(err)
			}
			want := []Charge{{Tokens, "", c.want}, {TokensPerDay, "", c.want}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

// TestDefaultReadings pins each vendor's default reading of every metric
// that settles.
func TestDefaultReadings(t *testing.T) {
	for _, c := range []struct {
		model CostModel
		want  map[Metric]Reading
	}{
		{OpenAICost(), map[Metric]Reading{Tokens: AdmissionKept, TokensPerDay: AdmissionKept}},
		{AzureCost(), map[Metric]Reading{Tokens: AdmissionKept}},
		{GroqCost(), map[Metric]Reading{Tokens: AdmissionKept, InputTokens: AdmissionKept, OutputTokens: AdmissionKept, TokensPerDay: AdmissionKept}},
		{GeminiCost(), map[Metric]Reading{Tokens: AdmissionKept}},
		{AnthropicCost(), map[Metric]Reading{InputTokens: AdjustedToUsage, OutputTokens: AdjustedToUsage}},
	} {
		got := map[Metric]Reading{}
		for _, mc := range c.model.Metrics {
			if mc.Settle != SettleNever {
				got[mc.Metric] = mc.Reading
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.model.Vendor, got, c.want)
		}
	}
}

func TestWithCostReading(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  []ProfileOption
		want  map[Metric]Reading
		field string // the *bucket.FieldError's field, when the profile fails
	}{
		{"default", nil, map[Metric]Reading{Tokens: AdmissionKept, TokensPerDay: AdmissionKept}, ""},
		{"every token metric", []ProfileOption{WithCostReading(AdjustedToUsage)},
			map[Metric]Reading{Tokens: AdjustedToUsage, TokensPerDay: AdjustedToUsage}, ""},
		{"one metric", []ProfileOption{WithCostReading(AdjustedToUsage, Tokens)},
			map[Metric]Reading{Tokens: AdjustedToUsage, TokensPerDay: AdmissionKept}, ""},
		{"later options win", []ProfileOption{WithCostReading(AdjustedToUsage), WithCostReading(AdmissionKept, TokensPerDay)},
			map[Metric]Reading{Tokens: AdjustedToUsage, TokensPerDay: AdmissionKept}, ""},
		{"requests have no reading", []ProfileOption{WithCostReading(AdmissionKept, Requests)}, nil, "cost_reading[rpm]"},
		{"a metric OpenAI does not count", []ProfileOption{WithCostReading(AdmissionKept, OutputTokens)}, nil, "cost_reading[output_tpm]"},
		{"an unknown reading", []ProfileOption{WithCostReading(Reading(7))}, nil, "cost_reading"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := OpenAIProfile(OpenAILimits{RPM: 500, TPM: 30000, TPD: 1e6}, c.opts...)
			if c.field != "" {
				var fe *bucket.FieldError
				if !errors.As(err, &fe) || fe.Field != c.field {
					t.Fatalf("got %v, want a *bucket.FieldError on %s", err, c.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[Metric]Reading{}
			for m := range c.want {
				got[m], _ = p.Cost.Reading(m)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestParseReading(t *testing.T) {
	for _, r := range []Reading{AdjustedToUsage, AdmissionKept} {
		if got, ok := ParseReading(r.String()); !ok || got != r {
			t.Errorf("ParseReading(%q) = %v, %v; want %v", r.String(), got, ok, r)
		}
	}
	if _, ok := ParseReading("kept"); ok {
		t.Error(`ParseReading("kept") accepted`)
	}
}

func TestDriftTokens(t *testing.T) {
	for _, c := range []struct {
		milli, reported, believed, drift int64
	}{
		{98_990_000, 98_000, 98_990, 990},
		{1_500, 3, 1, -2},
		{-1_500, 0, -2, -2},
		{-1_000, 0, -1, -1},
	} {
		d := Drift{Believed: floorDiv(c.milli, 1000), Reported: c.reported}
		if d.Believed != c.believed || d.Tokens() != c.drift {
			t.Errorf("%d millitokens against %d: believed %d drift %d, want %d and %d", c.milli, c.reported, d.Believed, d.Tokens(), c.believed, c.drift)
		}
	}
}
