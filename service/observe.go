package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"connectrpc.com/connect"

	"github.com/ontopix/sluice/service/auth"
	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
	"github.com/ontopix/sluice/vendors"
)

// maxObservedBody is how much of a vendor response's body Observe reads.
const maxObservedBody = 16 << 10

// WithProfiles lets Observe apply vendor responses to the profiles'
// dimensions (typically a limits file's Profiles), one vendors.Reactor per
// profile, configured by opts.
func WithProfiles(ps []vendors.Profile, opts ...vendors.ReactorOption) Option {
	return func(s *Server) {
		s.profiles = ps
		s.reactorOpts = opts
	}
}

// observer is a profile's Reactor and the dimensions it may change.
type observer struct {
	r    *vendors.Reactor
	dims []string
}

// profileKey is how a request names a profile: its dimension prefix.
func profileKey(p vendors.Profile) string {
	if p.Scope == "" {
		return string(p.Vendor)
	}
	return string(p.Vendor) + "#" + p.Scope
}

func (s *Server) buildObservers() {
	s.observers = make(map[string]observer, len(s.profiles))
	for _, p := range s.profiles {
		o := observer{r: vendors.NewReactor(s.c, p, s.reactorOpts...)}
		for _, d := range p.Dimensions {
			o.dims = append(o.dims, d.Name)
		}
		s.observers[profileKey(p)] = o
	}
}

func (a *api) Observe(ctx context.Context, req *connect.Request[sluicev1.ObserveRequest]) (*connect.Response[sluicev1.ObserveResponse], error) {
	m := req.Msg
	if err := auth.Check(ctx, auth.Observe); err != nil {
		return nil, err // before the lookup: nothing of the profiles is told
	}
	o, ok := a.s.observers[m.GetProfile()]
	if !ok {
		known := make([]string, 0, len(a.s.observers))
		for k := range a.s.observers {
			known = append(known, k)
		}
		sort.Strings(known)
		if len(known) == 0 {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("service: no vendor profile %q: the server has none (sluice serve takes them from the presets of its --limits file)", m.GetProfile()))
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("service: no vendor profile %q (the server has %s)", m.GetProfile(), strings.Join(known, ", ")))
	}
	if err := auth.Check(ctx, auth.Observe, o.dims...); err != nil {
		return nil, err
	}
	if st := m.GetStatus(); st < 100 || st > 599 {
		return nil, invalidArg("status", st, "must be an HTTP status, 100 to 599")
	}
	h := make(http.Header, len(m.GetHeaders()))
	for k, v := range m.GetHeaders() {
		h.Set(k, v)
	}
	body := m.GetBody()
	if len(body) > maxObservedBody {
		body = body[:maxObservedBody]
	}
	r, err := o.r.Observe(ctx, int(m.GetStatus()), h, body)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(reaction(r)), nil
}

// reaction converts what a Reactor did.
func reaction(r vendors.Reaction) *sluicev1.ObserveResponse {
	out := &sluicev1.ObserveResponse{
		Kind:    r.Classification.Kind.String(),
		Metric:  string(r.Classification.Metric),
		Cooled:  r.Cooled,
		Synced:  r.Synced,
		Resized: r.Resized,
		Clamped: r.Clamped,
	}
	for _, d := range r.Drift {
		out.Drift = append(out.Drift, &sluicev1.Drift{Dimension: d.Dimension, Believed: d.Believed, Reported: d.Reported})
	}
	if err := r.Err(); errors.Is(err, vendors.ErrQuotaExhausted) || errors.Is(err, vendors.ErrRequestTooLarge) {
		out.Error = err.Error()
	}
	return out
}
