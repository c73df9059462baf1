package vendors

import (
	"time"

	"testing"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

func TestGroqProfile(t *testing.T) {
	runProfileCases(t, []profileCase{
		{"every limit", func() (Profile, error) {
			return GroqProfile(GroqLimits{Model: "llama-3.3-70b-versatile", RPM: 30, RPD: 1_000, TPM: 12_000, TPD: 100_000, InputTPM: 10_000, OutputTPM: 3_000})
		}, []store.Bucket{
			{Name: "groq#llama-3.3-70b-versatile#rpm", Config: rate(bucket.Requests, 1, 30, 61_500*time.Millisecond)}, // 2 s + 50 ms a request
			{Name: "groq#llama-3.3-70b-versatile#tpm", Config: rate(bucket.Tokens, 11_760, 12_000, minute98)},
			{Name: "groq#llama-3.3-70b-versatile#input_tpm", Config: rate(bucket.Tokens, 9_800, 10_000, minute98)},
			{Name: "groq#llama-3.3-70b-versatile#output_tpm", Config: rate(bucket.Tokens, 2_940, 3_000, minute98)},
			{Name: "groq#llama-3.3-70b-versatile#rpd", Config: rate(bucket.Requests, 980, 1_000, day98)},
			{Name: "groq#llama-3.3-70b-versatile#tpd", Config: rate(bucket.Tokens, 98_000, 100_000, day98)},
		}},
	})
}
