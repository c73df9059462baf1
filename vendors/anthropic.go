package vendors

import (
	"time"

	"github.com/ontopix/sluice/bucket"
)

// AnthropicLimits are an Anthropic organization's (or workspace's) limits
// for one model class, as its limits page shows them. A zero field is not
// enforced; at least one must be set.
type AnthropicLimits struct {
	// Model scopes the dimensions (anthropic#claude-sonnet-4#input_tpm);
	// empty for anthropic#input_tpm.
	Model string
	// RPM is requests per minute.
	RPM int64
	// InputTPM is input tokens per minute (ITPM): uncached input only.
	InputTPM int64
	// OutputTPM is output tokens per minute (OTPM).
	OutputTPM int64
}

// AnthropicProfile returns the profile for Anthropic limits. Anthropic
// publishes its algorithm: each limit is a bucket replenished
// continuously, and "60 RPM might be enforced as 1 request per second".
// RPM is a bucket holding one second's worth (at least one request); ITPM
// and OTPM hold a minute's worth. Dimensions: <prefix>#rpm, #input_tpm,
// #output_tpm.
func AnthropicProfile(l AnthropicLimits, opts ...ProfileOption) (Profile, error) {
	b := newBuilder(Anthropic, "model", l.Model, AnthropicCost(), opts)
	b.continuous(Requests, bucket.Requests, l.RPM, time.Minute, perMinuteBurst(l.RPM))
	b.continuous(InputTokens, bucket.Tokens, l.InputTPM, time.Minute, l.InputTPM*1000)
	b.continuous(OutputTokens, bucket.Tokens, l.OutputTPM, time.Minute, l.OutputTPM*1000)
	return b.done("rpm, input_tpm, output_tpm")
}

// AnthropicCost returns Anthropic's cost model. ITPM is estimated at the
// start (the uncached input) and settled to input_tokens +
// cache_creation_input_tokens; cache reads do not count. OTPM counts
// output as it is produced and max_tokens does not count, so the
// admission charge is the caller's own output estimate (at least 1: the
// vendor admits on a positive balance) and the settlement is the actual
// output. Requests count 1 and are not refunded. Both token metrics are
// read as AdjustedToUsage because Anthropic says so: ITPM "is estimated
// at request start and adjusted during the request", and OTPM is
// evaluated as output is produced.
func AnthropicCost() CostModel {
	return CostModel{Vendor: Anthropic, Metrics: []MetricCost{
		{Requests, AdmitOne, SettleNever, AdjustedToUsage},
		{InputTokens, AdmitInput, SettleInputCacheCreation, AdjustedToUsage},
		{OutputTokens, AdmitOutputEstimate, SettleOutput, AdjustedToUsage},
	}}
}
