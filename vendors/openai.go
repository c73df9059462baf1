package vendors

import (
	"time"

	"github.com/ontopix/sluice/bucket"
)

// OpenAILimits are an OpenAI organization's or project's limits for one
// model (or model family sharing a limit), as its limits page shows them.
// A zero field is not enforced; at least one must be set.
type OpenAILimits struct {
	// Model scopes the dimensions (openai#gpt-4o#tpm); empty for limits
	// not tied to a model (openai#tpm).
	Model string
	// RPM is requests per minute.
	RPM int64
	// TPM is tokens per minute, input and output together.
	TPM int64
	// RPD is requests per day.
	RPD int64
	// TPD is tokens per day.
	TPD int64
}

// OpenAIProfile returns the profile for OpenAI limits. OpenAI does not
// publish its algorithm; Sluice reads it as continuous buckets (its reset
// header is the time until the limit is back to its initial state, and
// per-minute limits may be enforced over shorter intervals): RPM as a
// bucket holding one second's worth (at least one request), TPM as a
// bucket holding a minute's worth, RPD and TPD as buckets holding a day's.
// Dimensions: <prefix>#rpm, #tpm, #rpd, #tpd.
func OpenAIProfile(l OpenAILimits, opts ...ProfileOption) (Profile, error) {
	b := newBuilder(OpenAI, "model", l.Model, OpenAICost(), opts)
	b.continuous(Requests, bucket.Requests, l.RPM, time.Minute, perMinuteBurst(l.RPM))
	b.continuous(Tokens, bucket.Tokens, l.TPM, time.Minute, l.TPM*1000)
	b.continuous(RequestsPerDay, bucket.Requests, l.RPD, day, l.RPD*1000)
	b.continuous(TokensPerDay, bucket.Tokens, l.TPD, day, l.TPD*1000)
	return b.done("rpm, tpm, rpd, tpd")
}

// OpenAICost returns OpenAI's cost model: a request counts 1 against RPM
// and RPD even when it fails; tokens are charged max(max_tokens × n,
// estimated input) at admission (the estimate is the larger of the
// caller's token count and ceil(characters/4)) and settled to prompt +
// completion tokens, never below the admission charge (AdmissionKept).
// OpenAI publishes the admission charge but does not say that it corrects
// the count to the usage afterwards: read as adjusted to usage, a call
// with a short prompt and a large max_tokens would give back tokens that
// a vendor keeping its charge still counts, and the fleet would draw
// 429s. AdmissionKept cannot over-admit under either reading; choose
// AdjustedToUsage with WithCostReading to trust the refund.
func OpenAICost() CostModel {
	return CostModel{Vendor: OpenAI, Metrics: []MetricCost{
		{Requests, AdmitOne, SettleNever, AdjustedToUsage},
		{Tokens, AdmitMaxOutputOrInput, SettleInputOutput, AdmissionKept},
		{RequestsPerDay, AdmitOne, SettleNever, AdjustedToUsage},
		{TokensPerDay, AdmitMaxOutputOrInput, SettleInputOutput, AdmissionKept},
	}}
}
