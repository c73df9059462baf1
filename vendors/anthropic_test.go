package vendors

import (
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

func TestAnthropicProfile(t *testing.T) {
	runProfileCases(t, []profileCase{
		{"tier 1", func() (Profile, error) {
			return AnthropicProfile(AnthropicLimits{RPM: 50, InputTPM: 40_000, OutputTPM: 8_000})
		}, []store.Bucket{
			{Name: "anthropic#rpm", Config: rate(bucket.Requests, 1, 50, 62_500*time.Millisecond)}, // 1.2 s + 50 ms of arrival jitter a request
			{Name: "anthropic#input_tpm", Config: rate(bucket.Tokens, 39_200, 40_000, minute98)},
			{Name: "anthropic#output_tpm", Config: rate(bucket.Tokens, 7_840, 8_000, minute98)},
		}},
		{"model scope, 4000 RPM", func() (Profile, error) {
			return AnthropicProfile(AnthropicLimits{Model: "claude-sonnet-4", RPM: 4_000, OutputTPM: 400_000}, WithHeadroom(0.1))
		}, []store.Bucket{
			{Name: "anthropic#claude-sonnet-4#rpm", Config: rate(bucket.Requests, 59, 4_000, 66_667*time.Millisecond)}, // 66.66 × 0.9
			{Name: "anthropic#claude-sonnet-4#output_tpm", Config: rate(bucket.Tokens, 360_000, 400_000, 66_667*time.Millisecond)},
		}},
	})
}
