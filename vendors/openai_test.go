package vendors

import (
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

func TestOpenAIProfile(t *testing.T) {
	runProfileCases(t, []profileCase{
		{"gpt-4o tier 1", func() (Profile, error) { return OpenAIProfile(OpenAILimits{Model: "gpt-4o", RPM: 500, TPM: 30_000}) },
			[]store.Bucket{
				{Name: "openai#gpt-4o#rpm", Config: rate(bucket.Requests, 7, 500, minute98)}, // 8.33 a second, less 50 ms of requests (0.41) kept spare for arrival jitter
				{Name: "openai#gpt-4o#tpm", Config: rate(bucket.Tokens, 29_400, 30_000, minute98)},
			}},
		{"no headroom", func() (Profile, error) {
			return OpenAIProfile(OpenAILimits{RPM: 500, TPM: 30_000}, WithHeadroom(0))
		}, []store.Bucket{
			{Name: "openai#rpm", Config: rate(bucket.Requests, 7, 500, time.Minute)},
			{Name: "openai#tpm", Config: rate(bucket.Tokens, 30_000, 30_000, time.Minute)},
		}},
		{"5 % headroom and a smaller burst", func() (Profile, error) {
			return OpenAIProfile(OpenAILimits{RPM: 3_000, TPM: 1_000}, WithHeadroom(0.05), WithBurst(Requests, 10))
		}, []store.Bucket{
			{Name: "openai#rpm", Config: rate(bucket.Requests, 10, 3_000, 63_158*time.Millisecond)},
			{Name: "openai#tpm", Config: rate(bucket.Tokens, 950, 1_000, 63_158*time.Millisecond)},
		}},
		{"under 60 RPM: one request", func() (Profile, error) { return OpenAIProfile(OpenAILimits{RPM: 3}) },
			[]store.Bucket{{Name: "openai#rpm", Config: rate(bucket.Requests, 1, 3, minute98)}}},
		{"daily limits", func() (Profile, error) {
			return OpenAIProfile(OpenAILimits{Model: "o1", RPD: 10_000, TPD: 900_000})
		}, []store.Bucket{
			{Name: "openai#o1#rpd", Config: rate(bucket.Requests, 9_800, 10_000, day98)},
			{Name: "openai#o1#tpd", Config: rate(bucket.Tokens, 882_000, 900_000, day98)},
		}},
	})
}
