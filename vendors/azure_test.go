package vendors

import (
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

func TestAzureProfile(t *testing.T) {
	runProfileCases(t, []profileCase{
		{"30k TPM, RPM from the ratio", func() (Profile, error) {
			return AzureProfile(AzureLimits{Deployment: "gpt-4o-eu", TPM: 30_000})
		}, []store.Bucket{
			{Name: "azure#gpt-4o-eu#rpm", Config: rate(bucket.Requests, 1, 180, minute98)},
			// C + R = 29400 = floor(30000 × 0.98) per calendar minute; C a
			// sixth, below 8192.
			{Name: "azure#gpt-4o-eu#tpm", Config: rate(bucket.Tokens, 4_900, 24_500, time.Minute)},
		}},
		{"1M TPM: C a sixtieth, the rest refill", func() (Profile, error) {
			return AzureProfile(AzureLimits{TPM: 1_000_000})
		}, []store.Bucket{
			{Name: "azure#rpm", Config: rate(bucket.Requests, 1, 6_000, minute98)},
			// C + R = 980000; C = 980000 / 60, above 8192.
			{Name: "azure#tpm", Config: rate(bucket.Tokens, 16_333, 963_667, time.Minute)},
		}},
		{"100k TPM: C 8192, between a sixtieth and a sixth", func() (Profile, error) {
			return AzureProfile(AzureLimits{TPM: 100_000})
		}, []store.Bucket{
			{Name: "azure#rpm", Config: rate(bucket.Requests, 1, 600, minute98)},
			{Name: "azure#tpm", Config: rate(bucket.Tokens, 8_192, 89_808, time.Minute)},
		}},
		{"no headroom: RPM still under a second's ceil(RPM/60)", func() (Profile, error) {
			return AzureProfile(AzureLimits{TPM: 1_000}, WithHeadroom(0))
		}, []store.Bucket{
			{Name: "azure#rpm", Config: rate(bucket.Requests, 1, 6, 60_001*time.Millisecond)},
			{Name: "azure#tpm", Config: rate(bucket.Tokens, 166, 834, time.Minute)},
		}},
		{"explicit RPM and a larger burst", func() (Profile, error) {
			return AzureProfile(AzureLimits{TPM: 30_000, RPM: 6_000}, WithBurst(Tokens, 10_000), WithBurst(Requests, 2))
		}, []store.Bucket{
			{Name: "azure#rpm", Config: rate(bucket.Requests, 2, 6_000, minute98)},
			{Name: "azure#tpm", Config: rate(bucket.Tokens, 10_000, 19_400, time.Minute)},
		}},
		{"requests only", func() (Profile, error) { return AzureProfile(AzureLimits{RPM: 600}) },
			[]store.Bucket{{Name: "azure#rpm", Config: rate(bucket.Requests, 1, 600, minute98)}}},
	})
}
