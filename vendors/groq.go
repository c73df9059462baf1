package vendors

import (
	"time"

	"github.com/ontopix/sluice/bucket"
)

// GroqLimits are a Groq organization's limits for one model, as its limits
// page shows them. A zero field is not enforced; at least one must be set.
type GroqLimits struct {
	// Model scopes the dimensions (groq#llama-3.3-70b-versatile#tpm);
	// empty for groq#tpm.
	Model string
	// RPM and RPD are requests per minute and per day.
	RPM, RPD int64
	// TPM and TPD are tokens per minute and per day.
	TPM, TPD int64
	// InputTPM and OutputTPM are input and output tokens per minute, on
	// the models that have them.
	InputTPM, OutputTPM int64
}

// GroqProfile returns the profile for Groq limits. Groq does not publish
// its algorithm; Sluice reads it as OpenAI's (continuous buckets, RPM
// holding one second's worth, the others a window's worth). Dimensions:
// <prefix>#rpm, #tpm, #input_tpm, #output_tpm, #rpd, #tpd.
func GroqProfile(l GroqLimits, opts ...ProfileOption) (Profile, error) {
	b := newBuilder(Groq, "model", l.Model, GroqCost(), opts)
	b.continuous(Requests, bucket.Requests, l.RPM, time.Minute, perMinuteBurst(l.RPM))
	b.continuous(Tokens, bucket.Tokens, l.TPM, time.Minute, l.TPM*1000)
	b.continuous(InputTokens, bucket.Tokens, l.InputTPM, time.Minute, l.InputTPM*1000)
	b.continuous(OutputTokens, bucket.Tokens, l.OutputTPM, time.Minute, l.OutputTPM*1000)
	b.continuous(RequestsPerDay, bucket.Requests, l.RPD, day, l.RPD*1000)
	b.continuous(TokensPerDay, bucket.Tokens, l.TPD, day, l.TPD*1000)
	return b.done("rpm, tpm, input_tpm, output_tpm, rpd, tpd")
}

// GroqCost returns Groq's cost model: OpenAI's, except that cached tokens
// do not count, so settlements leave out prompt_tokens_details.cached_tokens.
// Output tokens per minute are charged max_tokens × n at admission (or the
// output estimate when no cap is set), as OpenAI reserves output. Every
// token metric is read as AdmissionKept, as OpenAI's is: Groq does not say
// that it corrects its count to the usage. A prompt served from the cache
// then stays charged at its estimate, which counts the cached tokens;
// WithCostReading(AdjustedToUsage, InputTokens) gives them back.
func GroqCost() CostModel {
	return CostModel{Vendor: Groq, Metrics: []MetricCost{
		{Requests, AdmitOne, SettleNever, AdjustedToUsage},
		{Tokens, AdmitMaxOutputOrInput, SettleUncachedInputOutput, AdmissionKept},
		{InputTokens, AdmitInput, SettleUncachedInput, AdmissionKept},
		{OutputTokens, AdmitMaxOutput, SettleOutput, AdmissionKept},
		{RequestsPerDay, AdmitOne, SettleNever, AdjustedToUsage},
		{TokensPerDay, AdmitMaxOutputOrInput, SettleUncachedInputOutput, AdmissionKept},
	}}
}
