// Package vendors makes Sluice's buckets match what each vendor enforces.
//
// A Profile turns a vendor's published limits (OpenAI, Anthropic, Azure
// OpenAI, Google Gemini, ElevenLabs, Groq) into bucket configurations that
// are never more permissive than the vendor's own rule, and states the
// vendor's cost model: what it counts when a request is admitted and what
// it settles later, and whether a settlement may refund below the
// admission charge (the Reading: AdjustedToUsage where the vendor says it
// corrects its count, AdmissionKept where it does not, which cannot
// over-admit under either reading). The header parsers read each vendor's rate-limit
// headers and 429 bodies into Signals, which a caller turns into a
// fleet-wide cooldown (sluice.Client.Cooldown) and a balance sync
// (sluice.Client.Sync).
//
// Package vendors/vendorsim is an HTTP server that speaks enough of the
// vendors' APIs, and enforces their published algorithms, to test an
// integration against.
package vendors

// Vendor names a vendor. Its value is the dimension prefix the profiles
// use, e.g. "openai" in "openai#tpm".
type Vendor string

// The vendors with a profile.
const (
	OpenAI     Vendor = "openai"
	Anthropic  Vendor = "anthropic"
	Azure      Vendor = "azure"
	Gemini     Vendor = "gemini"
	ElevenLabs Vendor = "elevenlabs"
	Groq       Vendor = "groq"
	OpenRouter Vendor = "openrouter"
)

// Metric names what a vendor limit counts, as its headers and error bodies
// name it. A profile maps each metric it enforces to one dimension.
type Metric string

// The metrics the parsers and profiles know.
const (
	// Requests counts requests (OpenAI x-ratelimit-*-requests, Anthropic
	// anthropic-ratelimit-requests-*).
	Requests Metric = "requests"
	// Tokens counts input and output tokens together (OpenAI
	// x-ratelimit-*-tokens; Anthropic anthropic-ratelimit-tokens-*, the
	// most restrictive token limit in effect).
	Tokens Metric = "tokens"
	// InputTokens counts input tokens (Anthropic ITPM, Groq ITPM).
	InputTokens Metric = "input_tokens"
	// OutputTokens counts output tokens (Anthropic OTPM, Groq OTPM).
	OutputTokens Metric = "output_tokens"
	// RequestsPerDay and TokensPerDay are daily limits (OpenAI RPD/TPD,
	// Gemini RPD, Groq RPD/TPD).
	RequestsPerDay Metric = "requests_per_day"
	TokensPerDay   Metric = "tokens_per_day"
	// Concurrent counts requests in flight (ElevenLabs).
	Concurrent Metric = "concurrent"
)
