// Package envoyrls serves Envoy's rate limit service (RLS v3,
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) from a
// sluice.Client, so that a gateway (Envoy, Contour, Emissary, kgateway,
// Istio) limits on the same buckets as the fleet's applications.
//
// Unlike a fixed-window counter, it acquires all of a request's
// descriptors at once or none of them, holds concurrent dimensions from the
// request to the end of its stream, and settles token counts known only at
// the end: with a correlation key (a descriptor entry carrying a request
// id), the second call Envoy sends when the stream ends
// (apply_on_stream_done) adds its hits to the first call's lease (negative
// hits refund) and releases it.
package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/sync/errgroup"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/service/auth"
)

// Procedure is the RPC's path.
const Procedure = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// Server answers ShouldRateLimit calls. It is safe for concurrent use.
type Server struct {
	c     *sluice.Client
	cfg   Config
	log   *slog.Logger
	reqs  *correlations
	specs *specCache
	now   func() time.Time
	// rules are cfg.Rules compiled, and opts every acquisition's options.
	rules []matcher
	opts  []sluice.AcquireOption
}

// New returns a Server deciding through c as cfg maps descriptors. cfg
// must be valid (see Config.Validate).
func New(c *sluice.Client, cfg Config) (*Server, error) {
	if c == nil {
		return nil, errors.New("envoyrls: nil client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("envoyrls: %w", err)
	}
	s := &Server{c: c, cfg: cfg, log: c.Logger(), now: time.Now}
	s.reqs = newCorrelations(cfg.LeaseTTL)
	s.specs = newSpecCache(c)
	for _, r := range cfg.Rules {
		s.rules = append(s.rules, compile(r))
	}
	s.opts = []sluice.AcquireOption{sluice.WithTTL(cfg.LeaseTTL), sluice.WithCaller("envoy")}
	return s, nil
}

// Handler returns the RPC's path and handler, to mount on a mux. It speaks
// gRPC (what Envoy sends) and also Connect and gRPC-Web. A request over
// 64 KiB is refused (resource_exhausted) before it is decoded, and answers
// under 1 KiB are never compressed, whatever the client accepts; opts may
// change either (connect.WithReadMaxBytes, connect.WithCompressMinBytes).
func (s *Server) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	opts = append([]connect.HandlerOption{connect.WithReadMaxBytes(64 << 10), connect.WithCompressMinBytes(1024)}, opts...)
	h := connect.NewUnaryHandler(Procedure, func(ctx context.Context, req *connect.Request[rlsv3.RateLimitRequest]) (*connect.Response[rlsv3.RateLimitResponse], error) {
		res, err := s.ShouldRateLimit(ctx, req.Msg)
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(res), nil
	}, opts...)
	return Procedure, h
}

// Close releases the leases of requests whose stream has not ended, up
// to 32 at once; it returns the first release error.
func (s *Server) Close(ctx context.Context) error {
	var (
		mu    sync.Mutex
		first error
		g     errgroup.Group
	)
	g.SetLimit(32) // releases at once: a shutdown's grace period is short
	for _, l := range s.reqs.drain() {
		g.Go(func() error {
			if err := l.Release(ctx); err != nil && !errors.Is(err, sluice.ErrLeaseReleased) && !errors.Is(err, sluice.ErrLeaseExpired) {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return first
}

// ShouldRateLimit decides one call. A call whose descriptors no rule maps
// is OK; an unknown dimension, a cost above a bucket's capacity or an
// unreachable store is an error, which Envoy treats by its
// failure_mode_deny (by default it lets the request through).
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if req.GetDomain() != s.cfg.Domain {
		return okFor(len(req.GetDescriptors())), nil
	}
	call, err := s.parse(req)
	if err != nil {
		return nil, err
	}
	dims := make([]string, len(call.items))
	for i, it := range call.items {
		dims[i] = it.dim
	}
	if err := auth.Check(ctx, auth.Acquire, dims...); err != nil {
		return nil, err
	}
	if p := auth.FromContext(ctx); p != nil && call.corr != "" {
		// A request belongs to the principal whose call opened it: another
		// one's call with the same id neither ends nor settles it.
		call.corr = p.Name + "\x00" + call.corr
	}
	if call.corr != "" {
		if done, ok := s.reqs.end(call.corr, s.now()); ok {
			s.settle(ctx, call, done)
			return okFor(len(req.GetDescriptors())), nil
		}
	}
	call.dropRefunds() // a first call has nothing to refund
	if len(call.items) == 0 {
		return okFor(len(req.GetDescriptors())), nil
	}
	return s.acquire(ctx, call)
}

// acquire is the first call of a request: every mapped dimension at once.
func (s *Server) acquire(ctx context.Context, call *call) (*rlsv3.RateLimitResponse, error) {
	reqs := make([]sluice.Request, len(call.items))
	for i, it := range call.items {
		// Hits of 0 check that the bucket has a token, and charge one
		// until the end-of-stream call settles it.
		reqs[i] = sluice.Request{Dimension: it.dim, Cost: max(it.hits, 1)}
	}
	res, err := s.c.AcquireMany(ctx, reqs, s.opts...)
	if err != nil {
		return nil, toConnect(err)
	}
	out := s.response(ctx, call, res)
	if !res.Granted() {
		if call.corr != "" {
			now := s.now()
			s.reqs.deny(call.corr, now, now.Add(s.cfg.LeaseTTL))
		}
		return out, nil
	}
	if call.corr == "" || !s.reqs.room() {
		// No end-of-stream call will settle it: a concurrent slot was a
		// check, and the charge stands. Released even if the call is over.
		_ = res.Lease.Release(context.WithoutCancel(ctx))
		return out, nil
	}
	held := &held{lease: res.Lease, placeholder: map[string]int64{}, types: map[string]string{}}
	for i, it := range call.items {
		if it.hits == 0 {
			held.placeholder[it.dim] = 1
		}
		if i < len(res.Dimensions) {
			held.types[it.dim] = res.Dimensions[i].Type.String()
		}
	}
	now := s.now()
	s.reqs.hold(call.corr, held, now, now.Add(s.cfg.LeaseTTL))
	return out, nil
}

// settle is the end-of-stream call of a request: its hits are added to the
// lease's requests and tokens dimensions (less what the first call charged
// for a check), and the lease is released.
//
// The settlement and the release are made whatever becomes of the call:
// Envoy gives it a short timeout (20 ms by default) and ignores the
// answer, but usage not settled goes uncounted and a slot not released is
// held until the lease's TTL. The Client bounds each store call by its
// operation timeout.
func (s *Server) settle(ctx context.Context, call *call, h *held) {
	if h == nil { // the first call was denied: nothing to settle
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, it := range call.items {
		if h.types[it.dim] == "concurrent" {
			continue
		}
		delta := it.hits - h.placeholder[it.dim]
		// A refund gives back at most what the request was charged.
		delta = max(delta, -h.lease.Cost(it.dim))
		if delta == 0 {
			continue
		}
		if _, err := h.lease.Adjust(ctx, it.dim, delta); err != nil {
			s.log.Warn("envoyrls.settle_failed", slog.String("dimension", it.dim), slog.Int64("delta", delta), slog.String("error", err.Error()))
		}
	}
	if err := h.lease.Release(ctx); err != nil && !errors.Is(err, sluice.ErrLeaseReleased) && !errors.Is(err, sluice.ErrLeaseExpired) {
		s.log.Warn("envoyrls.release_failed", slog.String("lease", h.lease.ID()), slog.String("error", err.Error()))
	}
}

// toConnect gives a library error its gRPC code.
func toConnect(err error) error {
	switch {
	case errors.Is(err, sluice.ErrUnknownDimension):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, sluice.ErrInvalid), errors.Is(err, sluice.ErrCostExceedsCapacity):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, sluice.ErrUnavailable), errors.Is(err, sluice.ErrClosed):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	}
	return connect.NewError(connect.CodeUnknown, err)
}
