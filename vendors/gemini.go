package vendors

import (
	"time"

	"github.com/ontopix/sluice/bucket"
)

// GeminiLimits are a Google Cloud project's Gemini API limits for one
// model, as its quota page shows them. A zero field is not enforced; at
// least one must be set.
type GeminiLimits struct {
	// Model scopes the dimensions (gemini#gemini-2.5-flash#tpm); empty for
	// gemini#tpm.
	Model string
	// RPM is requests per minute.
	RPM int64
	// TPM is input tokens per minute: Gemini counts input only.
	TPM int64
	// RPD is requests per day, reset at midnight Pacific time.
	RPD int64
}

// GeminiProfile returns the profile for Gemini limits. Google does not
// publish the algorithm; Sluice reads RPM as a continuous bucket holding
// one second's worth (at least one request) and TPM as one holding a
// minute's worth. RPD is a count reset at midnight Pacific: a fixed
// window, so the bucket keeps capacity + refill within the day's limit
// and refills over 25 hours, the longest Pacific day, so that even the day
// daylight saving time ends admits no more than RPD. Dimensions:
// <prefix>#rpm, #tpm, #rpd.
func GeminiProfile(l GeminiLimits, opts ...ProfileOption) (Profile, error) {
	b := newBuilder(Gemini, "model", l.Model, GeminiCost(), opts)
	b.continuous(Requests, bucket.Requests, l.RPM, time.Minute, perMinuteBurst(l.RPM))
	b.continuous(Tokens, bucket.Tokens, l.TPM, time.Minute, l.TPM*1000)
	b.fixed(RequestsPerDay, bucket.Requests, l.RPD, day, pacificDay)
	return b.done("rpm, tpm, rpd")
}

// GeminiCost returns Gemini's cost model: a request counts 1 against RPM
// and RPD; TPM counts input tokens only, estimated at admission and
// settled to promptTokenCount, never below the estimate (AdmissionKept):
// Gemini publishes no algorithm, and that reading cannot over-admit
// whether or not it corrects its count to the usage.
func GeminiCost() CostModel {
	return CostModel{Vendor: Gemini, Metrics: []MetricCost{
		{Requests, AdmitOne, SettleNever, AdjustedToUsage},
		{Tokens, AdmitInput, SettleInput, AdmissionKept},
		{RequestsPerDay, AdmitOne, SettleNever, AdjustedToUsage},
	}}
}
