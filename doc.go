// Package sluice lets a fleet of processes share vendor API limits — OpenAI
// requests and tokens per minute, Anthropic input/output tokens, ElevenLabs
// concurrent requests — so that the fleet as a whole never exceeds them.
//
// Sluice is not in the request path. A caller asks a Client for a slot on one
// or more dimensions ("openai#rpm", "openai#tpm", "elevenlabs#concurrent");
// the answer is GRANTED, with a Lease, or RETRY_IN, with exactly how long to
// wait. The caller then talks to the vendor directly and releases the lease.
// State lives in a store.Store: store/memstore for one process, or Redis,
// DynamoDB or PostgreSQL for a fleet.
//
// An acquisition over several dimensions is all-or-nothing: either every
// dimension is debited or nothing changes. Token costs can be estimated up
// front and settled afterwards with Lease.Adjust or Lease.Settle, into debt
// if the estimate was low. Concurrent dimensions get their slot back on
// Release, and the reconciler (package reconcile) returns the slots of
// callers that crashed.
//
// A denial is a value (Result.Outcome == RetryIn), not an error. Errors are
// reserved for what waiting cannot fix: an unknown dimension
// (*ConfigurationError), a cost above capacity (ErrCostExceedsCapacity),
// invalid input (ErrInvalid), or a store that cannot be reached
// (ErrUnavailable, unless the client fails open).
//
// The package imports only the standard library and the module's own bucket
// and store packages.
package sluice
