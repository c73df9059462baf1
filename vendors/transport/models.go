package transport

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ontopix/sluice/vendors"
)

// ModelPolicy says what the Transport does with a call to a known
// endpoint of a routed vendor host whose model matches no profile: no
// profile scoped to the model or to the family it resolves to (see
// WithModelAliases), no unscoped profile of the vendor, and no fallback
// (WithFallbackProfile).
type ModelPolicy uint8

// The policies.
const (
	// RefuseModel refuses the call (the default): RoundTrip returns an
	// error matching ErrUnmeteredModel that names the vendor, the model
	// and the fix, sends nothing, and reports a Denied event.
	RefuseModel ModelPolicy = iota
	// PassModel sends the call unmetered and reports a Passed event, as
	// every pass-through is reported.
	PassModel
)

// ErrUnmeteredModel is matched by the error a call returns when its model
// matches no profile and the ModelPolicy is RefuseModel.
var ErrUnmeteredModel = errors.New("transport: no profile meters this model")

// WithUnknownModels sets the policy for a call whose model matches no
// profile (default RefuseModel).
func WithUnknownModels(p ModelPolicy) Option { return func(t *Transport) { t.models = p } }

// WithModelAliases adds model names, each resolved to the profile scope
// (the model family) it maps to, e.g. {"gpt-4o-2024-11-20": "gpt-4o"}.
// Aliases are checked after an exact scope and before the built-in
// patterns (see ResolveModel). Later calls add to earlier ones.
func WithModelAliases(aliases map[string]string) Option {
	return func(t *Transport) {
		if t.aliases == nil {
			t.aliases = map[string]string{}
		}
		for k, v := range aliases {
			t.aliases[k] = v
		}
	}
}

// WithFallbackProfile meters a call of vendor v whose model matches no
// profile under v's profile with the given scope, which must be one of
// the profiles given to New (New refuses it otherwise). The call's Event
// still names its own model.
func WithFallbackProfile(v vendors.Vendor, scope string) Option {
	return func(t *Transport) {
		if t.fallback == nil {
			t.fallback = map[vendors.Vendor]string{}
		}
		t.fallback[v] = scope
	}
}

// ResolveModel returns the model family a model name stands for under the
// vendors' documented naming: a dated snapshot (OpenAI's
// "gpt-4o-2024-08-06" and "gpt-4-0613", Anthropic's
// "claude-3-5-sonnet-20241022") is its family ("gpt-4o", "gpt-4",
// "claude-3-5-sonnet"), and so is a moving alias ending in "-latest"
// ("claude-3-5-sonnet-latest", "chatgpt-4o-latest" → "chatgpt-4o"). The
// four-digit form (-MMDD) is read only in "gpt-" names: in
// "llama3-70b-8192" it is a context length. Any other name is returned
// unchanged: "gpt-4o-mini" is a family of its own, with limits of its own.
func ResolveModel(model string) string {
	if s, ok := strings.CutSuffix(model, "-latest"); ok && s != "" {
		return s
	}
	i := strings.LastIndexByte(model, '-')
	if i <= 0 {
		return model
	}
	tail := model[i+1:]
	switch {
	case allDigits(tail) && len(tail) == 8:
		return model[:i] // -YYYYMMDD
	case allDigits(tail) && len(tail) == 4 && strings.HasPrefix(model, "gpt-"):
		return model[:i] // OpenAI's -MMDD; elsewhere four digits may be a context length
	case len(tail) == 2 && allDigits(tail):
		// -YYYY-MM-DD: the last three dash-separated parts.
		parts := strings.Split(model, "-")
		if n := len(parts); n >= 4 && len(parts[n-3]) == 4 && allDigits(parts[n-3]) && len(parts[n-2]) == 2 && allDigits(parts[n-2]) {
			return strings.Join(parts[:n-3], "-")
		}
	}
	return model
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// resolve returns the entry metering a call of vendor v to model: the
// profile scoped to the model, to its alias (WithModelAliases), to its
// family (ResolveModel), the vendor's unscoped profile, or the fallback
// (WithFallbackProfile), in that order; nil when none applies.
func (t *Transport) resolve(v vendors.Vendor, model string) *entry {
	byScope := t.profiles[v]
	if e := byScope[model]; e != nil && model != "" {
		return e
	}
	if s, ok := t.aliases[model]; ok {
		if e := byScope[s]; e != nil {
			return e
		}
	}
	if e := byScope[ResolveModel(model)]; e != nil && model != "" {
		return e
	}
	if e := byScope[""]; e != nil {
		return e
	}
	if s, ok := t.fallback[v]; ok {
		return byScope[s]
	}
	return nil
}

// validateFallbacks checks that every fallback names a given profile.
func (t *Transport) validateFallbacks() error {
	for v, s := range t.fallback {
		if t.profiles[v][s] == nil {
			return fmt.Errorf("transport: fallback profile %s scope %q is not one of the profiles given: %w", v, s, ErrNoProfile)
		}
	}
	return nil
}

// unmetered handles a call whose model matches no profile.
func (t *Transport) unmetered(req *http.Request, next sender, ev Event, raw []byte) (*http.Response, error) {
	if t.models == PassModel {
		return t.pass(req, next, ev, raw, "model has no profile")
	}
	t.stats.refused.Add(1)
	err := fmt.Errorf("%w: %s model %q matches no profile (scoped to it, to its family %q, or unscoped): add a preset for it or an unscoped %s preset to the limits file, map it with transport.WithModelAliases, or meter it under another profile with transport.WithFallbackProfile",
		ErrUnmeteredModel, ev.Vendor, ev.Model, ResolveModel(ev.Model), ev.Vendor)
	ev.Outcome, ev.Err = Denied, err
	t.emit(req.Context(), ev)
	return nil, err
}

// pass sends a request to a routed host unmetered, reporting a Passed
// event with the reason.
func (t *Transport) pass(req *http.Request, next sender, ev Event, raw []byte, reason string) (*http.Response, error) {
	if raw != nil {
		req = withBody(req.WithContext(req.Context()), raw)
	}
	t.stats.passed.Add(1)
	resp, err := next(req)
	ev.Outcome, ev.PassReason, ev.Err = Passed, reason, err
	if resp != nil {
		ev.Status = resp.StatusCode
	}
	t.emit(req.Context(), ev)
	return resp, err
}
