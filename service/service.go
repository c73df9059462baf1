// Package service serves the Sluice API v1 (proto/sluice/v1/sluice.proto)
// over one http.Handler: Connect (JSON or binary over HTTP/1.1 and
// HTTP/2), gRPC and gRPC-Web, plus gRPC health checking. It lets a process
// in any language, or a gateway, acquire, settle and release leases on the
// buckets a sluice.Client reaches; `sluice serve` runs it.
//
// A denial is a successful response (granted false, with retry_in). Errors
// carry the Connect code that matches the library's error: invalid input
// is InvalidArgument, an unknown dimension or lease NotFound, a lease id
// reused for another request AlreadyExists, an expired or released lease
// FailedPrecondition, too many waiters ResourceExhausted and an
// unreachable store Unavailable.
//
// The server holds the leases it grants until they are released or
// expire, so that Settle, Heartbeat and Release act on them as the
// library's *sluice.Lease does (including handing a released slot to the
// next waiter in line on the same server). A lease's calls must therefore
// reach the server that granted it; another server answers NotFound (or
// released false for Release), and the lease expires after its TTL.
package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"golang.org/x/sync/errgroup"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/service/auth"
	"github.com/ontopix/sluice/service/gen/sluice/v1/sluicev1connect"
	"github.com/ontopix/sluice/vendors"
)

// Defaults of the server's options.
const (
	// DefaultMaxLeases bounds the leases one server holds at once.
	DefaultMaxLeases = 100_000
	// DefaultMaxRequestBytes bounds a request message's size.
	DefaultMaxRequestBytes = 64 << 10
	// DefaultWaitMargin is kept between the end of a server-side wait and
	// the call's deadline, so that the answer reaches the caller in time.
	DefaultWaitMargin = 50 * time.Millisecond
	// idempotencyWindow is how long an answer is kept under its key.
	idempotencyWindow = time.Minute
	// maxHeartbeat bounds the lease ids of one Heartbeat.
	maxHeartbeat = 1000
)

// Server serves the Sluice API v1 over a sluice.Client. Create it with New;
// it is safe for concurrent use.
type Server struct {
	c          *sluice.Client
	maxLeases  int
	maxBytes   int
	waitMargin time.Duration

	leases *registry
	costs  costCache
	keys   *idempotency
	auth   *auth.Authenticator

	profiles    []vendors.Profile
	reactorOpts []vendors.ReactorOption
	observers   map[string]observer

	mu     sync.Mutex
	closed bool
}

// Option configures a Server.
type Option func(*Server)

// WithMaxLeases bounds the leases the server holds at once (default
// DefaultMaxLeases); an acquisition beyond it fails with ResourceExhausted.
func WithMaxLeases(n int) Option { return func(s *Server) { s.maxLeases = n } }

// WithMaxRequestBytes bounds a request message's size (default
// DefaultMaxRequestBytes); a larger one fails with ResourceExhausted.
func WithMaxRequestBytes(n int) Option { return func(s *Server) { s.maxBytes = n } }

// WithAuth makes the server refuse calls without a known token or client
// certificate (Unauthenticated) and calls its principal may not make
// (PermissionDenied); see package auth. A lease belongs to the principal
// that acquired it. Health checks stay open.
func WithAuth(a *auth.Authenticator) Option { return func(s *Server) { s.auth = a } }

// New returns a Server that grants leases through c. The caller keeps
// ownership of c and closes it after Close.
func New(c *sluice.Client, opts ...Option) (*Server, error) {
	if c == nil {
		return nil, errors.New("service: nil client")
	}
	s := &Server{c: c, maxLeases: DefaultMaxLeases, maxBytes: DefaultMaxRequestBytes, waitMargin: DefaultWaitMargin}
	for _, o := range opts {
		o(s)
	}
	if s.maxLeases < 1 {
		return nil, &sluice.FieldError{Field: "max_leases", Value: s.maxLeases, Reason: "must be at least 1"}
	}
	if s.maxBytes < 1024 {
		return nil, &sluice.FieldError{Field: "max_request_bytes", Value: s.maxBytes, Reason: "must be at least 1024"}
	}
	s.buildObservers()
	s.leases = newRegistry(s.maxLeases)
	s.keys = newIdempotency(10 * s.maxLeases)
	return s, nil
}

// compressMinBytes is the smallest answer the server compresses for a
// client that accepts gzip: a decision's answer is a few dozen bytes, and
// compressing it took a third of the server's CPU; a Peek of many buckets
// is still compressed.
const compressMinBytes = 1024

// Handler returns the server's routes: the LimiterService under
// /sluice.v1.LimiterService/ and gRPC health checking
// (/grpc.health.v1.Health/), to be mounted at the root of a mux.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(s.maxBytes), connect.WithCompressMinBytes(compressMinBytes)}
	path, h := sluicev1connect.NewLimiterServiceHandler(&api{s}, opts...)
	if s.auth != nil {
		h = s.auth.Middleware(h)
	}
	mux.Handle(path, h)
	mux.Handle(grpchealth.NewHandler(grpchealth.NewStaticChecker(sluicev1connect.LimiterServiceName)))
	return mux
}

// Held reports how many leases the server holds.
func (s *Server) Held() int { return s.leases.len() }

// Close releases every lease the server holds, within ctx, and refuses
// new acquisitions; call it after the HTTP server's Shutdown has finished
// the calls in flight. It releases up to closeParallel leases at once (a
// shutdown's grace period is short, and each release is a store round
// trip), and returns the first release error; a lease that could not be
// released expires after its TTL.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	var (
		mu    sync.Mutex
		first error
		g     errgroup.Group
	)
	g.SetLimit(closeParallel)
	for _, l := range s.leases.drain() {
		g.Go(func() error {
			if err := l.Release(ctx); err != nil && !errors.Is(err, sluice.ErrLeaseReleased) && !errors.Is(err, sluice.ErrLeaseExpired) {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("service: release %s: %w", l.ID(), err)
				}
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return first
}

// closeParallel is how many leases Close releases at once.
const closeParallel = 32

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// errClosing is answered to acquisitions after Close.
var errClosing = connect.NewError(connect.CodeUnavailable, errors.New("service: the server is shutting down"))
