package remotestore

// The wire form of the store door. A request and its answer are the store
// package's own types in JSON; an error is a wireError, from which the
// typed errors and sentinels of the store contract are rebuilt, so that
// errors.Is and errors.As see through the door what they see in process.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Prefix is the store door's path prefix; an operation is Prefix + its
// name.
const Prefix = "/sluice.store.v1/"

// capabilities is the answer of Prefix + "Capabilities": the optional
// capabilities of the store behind the door.
type capabilities struct {
	Queuer       bool `json:"queuer"`
	Cooler       bool `json:"cooler"`
	Syncer       bool `json:"syncer"`
	FreedWatcher bool `json:"freed_watcher"`
	CallerClock  bool `json:"caller_clock"`
	Usager       bool `json:"usager"`
}

// usagePut is a PutUsage request on the wire.
type usagePut struct {
	Rows      []store.UsageRow     `json:"rows"`
	Retention store.UsageRetention `json:"retention"`
}

// answer is an operation's answer: its result, and its error when it
// failed (a result may come with an error).
type answer struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

// wireError is an error's wire form.
type wireError struct {
	// Message is the error's text.
	Message string `json:"message"`
	// Matches names the sentinels the error matches (errors.Is).
	Matches []string `json:"matches,omitempty"`
	// Field, Value and Reason are a *bucket.FieldError's.
	Field  string `json:"field,omitempty"`
	Value  string `json:"value,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Dimension, Cost, Capacity and Found are those of a
	// *store.ConfigurationError, *store.CostError or *store.ConflictError.
	Dimension string `json:"dimension,omitempty"`
	Cost      int64  `json:"cost,omitempty"`
	Capacity  int64  `json:"capacity,omitempty"`
	Found     bool   `json:"found,omitempty"`
	// Type is "field", "configuration", "cost", "conflict" or "".
	Type string `json:"type,omitempty"`
}

// sentinels are the errors an Error may match, by wire name.
var sentinels = []struct {
	name string
	err  error
}{
	{"invalid", store.ErrInvalid},
	{"unknown_dimension", store.ErrUnknownDimension},
	{"cost_exceeds_capacity", store.ErrCostExceedsCapacity},
	{"unknown_lease", store.ErrUnknownLease},
	{"lease_expired", store.ErrLeaseExpired},
	{"unavailable", store.ErrUnavailable},
	{"contention", store.ErrContention},
	{"closed", store.ErrClosed},
	{"lease_in_use", store.ErrLeaseInUse},
	{"conflict", store.ErrConflict},
	{"unsupported", errors.ErrUnsupported},
	{"deadline_exceeded", context.DeadlineExceeded},
	{"canceled", context.Canceled},
}

// encodeError returns err's wire form.
func encodeError(err error) *wireError {
	e := &wireError{Message: err.Error()}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			e.Matches = append(e.Matches, s.name)
		}
	}
	var fe *bucket.FieldError
	var ce *store.ConfigurationError
	var co *store.CostError
	var cf *store.ConflictError
	switch {
	case errors.As(err, &fe):
		e.Type, e.Field, e.Value, e.Reason = "field", fe.Field, fmt.Sprint(fe.Value), fe.Reason
	case errors.As(err, &ce):
		e.Type, e.Dimension = "configuration", ce.Dimension
	case errors.As(err, &co):
		e.Type, e.Dimension, e.Cost, e.Capacity = "cost", co.Dimension, co.Cost, co.Capacity
	case errors.As(err, &cf):
		e.Type, e.Dimension, e.Found = "conflict", cf.Dimension, cf.Found
	}
	return e
}

// decode rebuilds an error from its wire form: the typed error it was,
// inside an error with the original message that matches every sentinel
// the original matched.
func (e *wireError) decode() error {
	var typed error
	switch e.Type {
	case "field":
		typed = &bucket.FieldError{Field: e.Field, Value: e.Value, Reason: e.Reason}
	case "configuration":
		typed = &store.ConfigurationError{Dimension: e.Dimension}
	case "cost":
		typed = &store.CostError{Dimension: e.Dimension, Cost: e.Cost, Capacity: e.Capacity}
	case "conflict":
		typed = &store.ConflictError{Dimension: e.Dimension, Found: e.Found}
	}
	r := &remote{msg: e.Message, typed: typed}
	for _, name := range e.Matches {
		for _, s := range sentinels {
			if s.name == name {
				r.matches = append(r.matches, s.err)
			}
		}
	}
	return r
}

// remote is an error that crossed the door.
type remote struct {
	msg     string
	typed   error
	matches []error
}

func (r *remote) Error() string { return r.msg }

// Is reports whether the original error matched target.
func (r *remote) Is(target error) bool {
	for _, m := range r.matches {
		if m == target {
			return true
		}
	}
	return false
}

// Unwrap gives errors.As the typed error.
func (r *remote) Unwrap() error { return r.typed }
