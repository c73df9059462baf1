package vendors_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/ontopix/sluice/vendors"
)

// ParseHeaders reads OpenAI's relative resets against the arrival time.
func ExampleParseHeaders() {
	now := time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("x-ratelimit-limit-tokens", "150000")
	h.Set("x-ratelimit-remaining-tokens", "149984")
	h.Set("x-ratelimit-reset-tokens", "6m0s")

	s := vendors.ParseHeaders(vendors.OpenAI, h, now)
	tpm := s.Metric(vendors.Tokens)
	fmt.Println("limit:", tpm.Limit.Value, "remaining:", tpm.Remaining.Value)
	fmt.Println("full again at:", tpm.Reset.At.Format(time.TimeOnly))
	// Output:
	// limit: 150000 remaining: 149984
	// full again at: 14:06:00
}

// Azure sends -1 and 0 when it has no value: they are unknown, not "nothing
// left, reset now".
func ExampleParseHeaders_azureSentinels() {
	now := time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("x-ratelimit-limit-tokens", "-1")
	h.Set("x-ratelimit-remaining-tokens", "-1")
	h.Set("x-ratelimit-reset-tokens", "0")

	s := vendors.ParseHeaders(vendors.Azure, h, now)
	tpm := s.Metric(vendors.Tokens)
	fmt.Println("known:", tpm.Known())
	for _, p := range s.Problems {
		fmt.Println(p)
	}
	// Output:
	// known: false
	// vendors: unusable x-ratelimit-limit-tokens value "-1": a limit of -1 is a sentinel for no value; the family is unknown
	// vendors: unusable x-ratelimit-remaining-tokens value "-1": negative: a sentinel for no value
	// vendors: unusable x-ratelimit-reset-tokens value "0": zero: the vendor names no instant to wait for
}

// Anthropic rounds token remainders to the nearest thousand; RemainingFloor
// is the conservative reading.
func ExampleMetricSignals_RemainingFloor() {
	now := time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("anthropic-ratelimit-input-tokens-remaining", "29000")
	h.Set("anthropic-ratelimit-input-tokens-reset", "2026-11-23T14:00:05Z")

	itpm := vendors.ParseHeaders(vendors.Anthropic, h, now).Metric(vendors.InputTokens)
	low, _ := itpm.RemainingFloor()
	fmt.Println("header:", itpm.Remaining.Value, "granularity:", itpm.Granularity, "at least:", low)
	// Output:
	// header: 29000 granularity: 1000 at least: 28500
}

// ParseReset needs the vendor's format: the same text means different
// instants, and a value in the wrong format is refused, not misread.
func ExampleParseReset() {
	now := time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)
	for _, in := range []struct {
		format vendors.ResetFormat
		value  string
	}{
		{vendors.ResetDuration, "7.66s"},
		{vendors.ResetRFC3339, "2026-11-23T14:00:05Z"},
		{vendors.ResetSeconds, "12"},
		{vendors.ResetEpochMillis, "1795442430000"},
		{vendors.ResetEpochMillis, "6m0s"},
	} {
		at, err := vendors.ParseReset(in.format, in.value, now)
		if err != nil {
			fmt.Println(in.format, err)
			continue
		}
		fmt.Println(in.format, "in", at.Sub(now))
	}
	// Output:
	// duration in 7.66s
	// rfc3339 in 5s
	// seconds in 12s
	// epoch-millis in 30s
	// epoch-millis vendors: unusable value "6m0s": not a number; want a Unix time
}
