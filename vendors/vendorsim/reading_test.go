package vendorsim

import (
	"errors"
	"net/http"
	"testing"
)

// TestReadings plays one call, a 10-token prompt with max_tokens 600 that
// produces 50 tokens, and a second, larger than what an adjusting vendor
// leaves but not what a keeping one does, under every reading.
func TestReadings(t *testing.T) {
	for _, c := range []struct {
		name      string
		vendor    Vendor
		reading   Reading
		counted   int64 // TPM counted after the first call
		remaining int64
		second    int // the status of a call charging 500 tokens
	}{
		{"openai default: adjusted", OpenAI, VendorReading, 60, 940, http.StatusOK},
		{"openai adjusted to usage", OpenAI, AdjustedToUsage, 60, 940, http.StatusOK},
		{"openai admission kept", OpenAI, AdmissionKept, 600, 400, http.StatusTooManyRequests},
		{"azure default: kept", Azure, VendorReading, 610, 390, http.StatusTooManyRequests},
		{"azure adjusted to usage", Azure, AdjustedToUsage, 60, 940, http.StatusOK},
		{"azure admission kept", Azure, AdmissionKept, 610, 390, http.StatusTooManyRequests},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newSim(t, Config{Vendor: c.vendor, Limits: Limits{RPM: 6000, TPM: 1000}, Rules: Rules{Reading: c.reading}})
			wantStatus(t, post(t, s, PathChatCompletions, chatBody(10, 600), HeaderOutputTokens, "50"), http.StatusOK)
			got := metricStats(t, s, MetricTokens)
			if got.Counted != c.counted || got.Remaining != c.remaining {
				t.Errorf("TPM counted %d remaining %d, want %d and %d", got.Counted, got.Remaining, c.counted, c.remaining)
			}
			wantStatus(t, post(t, s, PathChatCompletions, chatBody(10, 500), HeaderOutputTokens, "1"), c.second)
		})
	}
}

// An Azure refund never takes a fixed window's count below zero: the
// charge it refunds was counted in a window that has gone.
func TestAzureAdjustedRefundAcrossWindows(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: Azure, Limits: Limits{RPM: 6000, TPM: 1000}, Rules: Rules{Reading: AdjustedToUsage},
		PerOutputToken: Fixed(0)})
	m := s.lim.byName[MetricTokens]
	m.take(600)
	clk.Add(61e9)
	s.lim.advance(clk.Now())
	m.take(-590)
	if got := metricStats(t, s, MetricTokens).Remaining; got != 1000 {
		t.Errorf("remaining %d after a refund into a new window, want 1000", got)
	}
}

func TestReadingConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"openai kept", Config{Vendor: OpenAI, Rules: Rules{Reading: AdmissionKept}}, true},
		{"azure adjusted", Config{Vendor: Azure, Rules: Rules{Reading: AdjustedToUsage}}, true},
		{"anthropic default", Config{Vendor: Anthropic}, true},
		{"anthropic kept", Config{Vendor: Anthropic, Rules: Rules{Reading: AdmissionKept}}, false},
		{"unknown", Config{Vendor: OpenAI, Rules: Rules{Reading: 9}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.cfg)
			var fe *FieldError
			if got := err == nil; got != c.ok {
				t.Fatalf("New: %v, want ok=%v", err, c.ok)
			}
			if !c.ok && (!errors.As(err, &fe) || fe.Field != "Rules.Reading") {
				t.Errorf("error %v, want a FieldError on Rules.Reading", err)
			}
		})
	}
}
