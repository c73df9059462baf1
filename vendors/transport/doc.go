// Package transport meters the official OpenAI and Anthropic Go SDKs
// against a fleet's shared Sluice buckets with one line: an
// http.RoundTripper (Transport) given to the SDK as its HTTP client's
// transport, or its Middleware given to option.WithMiddleware.
//
// For each request to a known endpoint (OpenAI chat completions, responses
// and embeddings, Azure OpenAI deployments, Anthropic messages) the
// Transport estimates the call offline (Estimator: tiktoken encodings
// compiled in), takes the vendor profile's admission charges on every
// dimension at once, waiting in line within the request's deadline (the
// Client's Wait: requests and tokens reserved first come, first served
// across the fleet; a wait longer than the deadline fails at once with a
// *sluice.SlotTimeoutError, reserving nothing; WithPolling polls
// instead), holds the lease while
// the response body is read, and settles it to the usage the response
// reports, from the JSON body or the stream's final usage event, read as
// the stream passes in fixed memory. Every response's rate-limit headers
// go to a vendors.Reactor, so a 429 cools the whole fleet down; the 429
// itself goes back to the SDK, whose retry loop retries it.
//
// What a call leaves charged depends on how it ended (see Outcome): the
// reported usage; at least the admission charge for a stream cut short;
// nothing for a request the vendor never saw (a dial or DNS error); the
// admission charge for a failure after sending; the request only for a
// 4xx from OpenAI or Azure, nothing for one from Anthropic.
//
// docs/guide.md walks from a limits file to a fleet of metered clients.
package transport
