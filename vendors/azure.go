package vendors

import (
	"time"

	"github.com/ontopix/sluice/bucket"
)

// AzureLimits are one Azure OpenAI deployment's limits. A zero field is
// not enforced, except RPM, which Azure derives from TPM.
type AzureLimits struct {
	// Deployment scopes the dimensions (azure#my-gpt-4o#tpm); empty for
	// azure#tpm.
	Deployment string
	// TPM is the deployment's tokens per minute.
	TPM int64
	// RPM is its requests per minute. Zero means Azure's ratio: 6 RPM per
	// 1000 TPM, rounded down.
	RPM int64
}

// AzureRPMPerThousandTPM is the requests per minute Azure OpenAI grants for
// every 1000 tokens per minute of a deployment.
const AzureRPMPerThousandTPM = 6

// AzureProfile returns the profile for an Azure OpenAI deployment. Azure
// publishes its rules: TPM is a running count reset each calendar minute,
// so the bucket keeps capacity + refill per minute within TPM (by default
// a second's worth as capacity, at least 8,192 tokens and at most ten
// seconds' worth, and the rest as refill);
// RPM is evaluated over one-second windows, at most ceil(RPM/60) requests
// in a calendar second, so the bucket holds one request and refills RPM
// per (stretched) minute. Dimensions: <prefix>#rpm, #tpm.
func AzureProfile(l AzureLimits, opts ...ProfileOption) (Profile, error) {
	b := newBuilder(Azure, "deployment", l.Deployment, AzureCost(), opts)
	rpm := l.RPM
	if rpm == 0 && l.TPM > 0 && l.TPM <= bucket.MaxCapacity {
		rpm = l.TPM * AzureRPMPerThousandTPM / 1000
		if rpm == 0 {
			b.fail("tpm", l.TPM, "too small: Azure grants 6 RPM per 1000 TPM, so it gives no request per minute; set rpm")
		}
	}
	b.azureRequests(rpm)
	b.fixed(Tokens, bucket.Tokens, l.TPM, time.Minute, time.Minute)
	return b.done("tpm, rpm")
}

// AzureCost returns Azure OpenAI's cost model: a request counts 1, failed
// or not; tokens are charged prompt estimate + max_tokens × best_of at
// admission and read as AdmissionKept: Azure adds this "estimated max
// processed-token count" to a running count and does not say that it
// corrects it to the usage, so a settlement only charges more (to prompt
// + completion tokens when those exceed the charge), never refunds.
func AzureCost() CostModel {
	return CostModel{Vendor: Azure, Metrics: []MetricCost{
		{Requests, AdmitOne, SettleNever, AdjustedToUsage},
		{Tokens, AdmitInputPlusMaxOutput, SettleInputOutput, AdmissionKept},
	}}
}
