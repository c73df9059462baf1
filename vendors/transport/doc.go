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
// nothing for a request the vendor never saw (a dial, DNS or TLS handshake
// error); the admission charge for a failure after sending; the request
// only for a 4xx from OpenAI or Azure, nothing for one from Anthropic.
//
// A call's profile is the one scoped to its model, to its alias
// (WithModelAliases) or family (ResolveModel: a dated snapshot or a
// "-latest" alias is its family), the vendor's unscoped one, or the
// fallback (WithFallbackProfile). A call to a vendor host whose model
// matches none is refused (ErrUnmeteredModel) unless WithUnknownModels
// says to pass it; every request to a vendor host that is sent unmetered
// is a Passed event and counted (Transport.Stats). A settlement is capped
// at what the request could have used (its max_tokens times n, its body's
// size); the excess is logged, flagged and counted, never charged. A panic
// in the WithEvents function is recovered, logged and counted; one in the
// transport below ends the call as charged, its lease released, and goes
// on up.
//
// docs/guide.md walks from a limits file to a fleet of metered clients.
package transport
