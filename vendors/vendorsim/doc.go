// Package vendorsim is a local HTTP server that behaves like OpenAI,
// Anthropic or Azure OpenAI as far as rate limits go, so that an
// integration can be tested without spending money, and so that "did we go
// over the vendor's limit" is measured at the vendor.
//
// A Sim serves OpenAI Chat Completions, Responses and Embeddings (JSON and
// server-sent events), or Anthropic Messages, answering with filler text of
// a drawn length after a drawn latency. It enforces the vendor's rules with
// its own exact arithmetic:
//
//   - OpenAI: RPM as a bucket of max(1, RPM/60) requests refilled at RPM
//     per minute; TPM as a bucket of TPM refilled at TPM per minute,
//     charged max(max tokens, input tokens) at admission and adjusted to
//     input + output tokens when the response completes; RPD and TPD as
//     day-long buckets. A request rejected with 429 still takes one
//     request from RPM (never below zero).
//   - Anthropic: RPM as above; ITPM as a bucket charged the uncached input
//     (input plus cache writes, cache reads excluded) at admission; OTPM as
//     a bucket that admits while its balance is positive and is debited the
//     output as it is produced, possibly into debt. A 429 consumes nothing.
//   - Azure: TPM as a count reset every calendar minute, charged the input
//     plus max tokens × best_of and never refunded; RPM (6 per 1000 TPM
//     unless set) as at most ceil(RPM/60) requests per calendar second.
//     Rejected requests count.
//
// Every response carries the vendor's rate-limit headers; a 429 carries
// the vendor's body and retry-after. Stats reports, per limit, what was
// counted and the most the rule could have admitted over the elapsed time.
//
// Input tokens are counted by InputTokens: a quarter of the bytes of the
// prompt's text, rounded up. Requests may force the output length with
// HeaderOutputTokens and, for Anthropic, the cache usage with
// HeaderCacheReadTokens and HeaderCacheCreationTokens.
package vendorsim
