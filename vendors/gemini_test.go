package vendors

import (
	"testing"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

func TestGeminiProfile(t *testing.T) {
	runProfileCases(t, []profileCase{
		{"free tier flash", func() (Profile, error) {
			return GeminiProfile(GeminiLimits{Model: "gemini-2.5-flash", RPM: 10, TPM: 250_000, RPD: 250})
		}, []store.Bucket{
			{Name: "gemini#gemini-2.5-flash#rpm", Config: rate(bucket.Requests, 1, 10, minute98)},
			{Name: "gemini#gemini-2.5-flash#tpm", Config: rate(bucket.Tokens, 245_000, 250_000, minute98)},
			// C + R = 245 = floor(250 × 0.98) per 25 h, the longest Pacific day.
			{Name: "gemini#gemini-2.5-flash#rpd", Config: rate(bucket.Requests, 40, 205, pacificDay)},
		}},
		{"daily burst", func() (Profile, error) {
			return GeminiProfile(GeminiLimits{RPD: 1_500}, WithBurst(RequestsPerDay, 500))
		},
			[]store.Bucket{{Name: "gemini#rpd", Config: rate(bucket.Requests, 500, 970, pacificDay)}}},
	})
}
