package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/console"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/limits"
	sluiceprom "github.com/ontopix/sluice/observe/prometheus"
	"github.com/ontopix/sluice/service"
	"github.com/ontopix/sluice/service/auth"
	"github.com/ontopix/sluice/service/envoyrls"
	"github.com/ontopix/sluice/service/gen/sluice/v1/sluicev1connect"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/remotestore"
)

// serveOptions are the flags of sluice serve.
type serveOptions struct {
	listen     string
	limitsFile string
	maxLeases  int
	maxBytes   int
	reconcile  time.Duration
	drain      time.Duration
	idle       time.Duration
	failOpen   bool
	envoy      string
	authFile   string
	tlsCert    string
	tlsKey     string
	clientCA   string
}

func newServeCmd(g *globals) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the Sluice API to other languages and gateways",
		Long: `Serve runs the Sluice API v1 (proto/sluice/v1/sluice.proto) on one port:
Connect (JSON or binary over HTTP/1.1), gRPC and gRPC-Web, with gRPC health
checking, /healthz (the process runs), /readyz (the store answers),
/metrics (Prometheus) and /ui, the operator console: a live dashboard of
the buckets, leases, usage history per dimension and caller, and events
(docs/console.md). Callers in any language acquire, wait in line,
settle, heartbeat and release leases on the store's buckets.

The server holds the leases it grants: a lease's calls go to the server that
granted it. It reclaims expired leases every --reconcile (idempotent when
several servers run). On SIGTERM or Ctrl-C it stops accepting calls, lets
the calls in flight finish (waits included) within --drain, then releases
the leases it still holds.

Without --auth, serve listens only on a loopback address. With it, every
call needs a bearer token or a client certificate the file names, and may
use only the verbs and dimensions the file gives it; 'sluice serve token'
makes a token. The console is read-only; with --auth it needs the read verb,
and releasing a lease from it the admin verb. --tls-cert and --tls-key serve TLS; --client-ca verifies
client certificates.`,
		Example: `  sluice serve --store redis://127.0.0.1:6379/0 --limits limits.yaml
  curl -s -H 'Content-Type: application/json' \
    -d '{"items":[{"dimension":"openai#rpm","cost":1}]}' \
    http://127.0.0.1:7070/sluice.v1.LimiterService/Acquire`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd, g, o) },
	}
	cmd.AddCommand(newServeTokenCmd())
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:7070", "address to listen on (loopback only)")
	f.StringVarP(&o.limitsFile, "limits", "f", "", "limits file: its buckets are applied at start and re-created if the store loses them")
	f.IntVar(&o.maxLeases, "max-leases", service.DefaultMaxLeases, "most leases the server holds at once")
	f.IntVar(&o.maxBytes, "max-request-bytes", service.DefaultMaxRequestBytes, "largest request message, in bytes")
	f.DurationVar(&o.reconcile, "reconcile", 10*time.Second, "how often to reclaim expired leases (0: never)")
	f.DurationVar(&o.drain, "drain", 30*time.Second, "how long shutdown waits for calls in flight")
	f.DurationVar(&o.idle, "idle-timeout", 2*time.Minute, "how long a kept-alive connection may stay idle before the server closes it")
	f.StringVar(&o.envoy, "envoy", "", "serve Envoy's rate limit service (RLS v3) too, mapping descriptors to dimensions as this file says")
	f.StringVar(&o.authFile, "auth", "", "authentication file: bearer tokens (hashed) and client certificates, with the verbs and dimensions each may use; required to listen beyond loopback")
	f.StringVar(&o.tlsCert, "tls-cert", "", "serve TLS with this certificate (PEM); with --tls-key")
	f.StringVar(&o.tlsKey, "tls-key", "", "the TLS certificate's private key (PEM)")
	f.StringVar(&o.clientCA, "client-ca", "", "verify client certificates against these CAs (PEM), for principals identified by certificate")
	f.BoolVar(&o.failOpen, "fail-open", false, "grant without the store while it is unreachable (degraded grants); SLUICE_FAILURE_POLICY=open does the same")
	return cmd
}

// checkLoopback refuses an address that is not on a loopback interface,
// unless authentication is configured.
func checkLoopback(addr string, authed bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("invalid --listen %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if (ip == nil || !ip.IsLoopback()) && !authed {
		return usagef("invalid --listen %q: without --auth, serve listens only on a loopback address (127.0.0.1, ::1 or localhost); give --auth to reach it from other hosts", addr)
	}
	return nil
}

func runServe(cmd *cobra.Command, g *globals, o *serveOptions) error {
	var authn *auth.Authenticator
	if o.authFile != "" {
		var err error
		if authn, err = auth.Load(o.authFile); err != nil {
			return usagef("invalid --auth: %v", err)
		}
	}
	if err := checkLoopback(o.listen, authn != nil); err != nil {
		return err
	}
	tlsCfg, err := serveTLS(o, authn)
	if err != nil {
		return err
	}
	if o.reconcile < 0 {
		return usagef("invalid --reconcile %s: must be at least 0", o.reconcile)
	}
	if o.drain <= 0 {
		return usagef("invalid --drain %s: must be positive", o.drain)
	}
	if o.maxLeases < 1 {
		return usagef("invalid --max-leases %d: must be at least 1", o.maxLeases)
	}
	if o.maxBytes < 1024 {
		return usagef("invalid --max-request-bytes %d: must be at least 1024", o.maxBytes)
	}
	if o.idle <= 0 {
		return usagef("invalid --idle-timeout %s: must be positive", o.idle)
	}
	var rlsCfg *envoyrls.Config
	if o.envoy != "" {
		var err error
		if rlsCfg, err = envoyrls.LoadConfig(o.envoy); err != nil {
			return usagef("invalid --envoy: %v", err)
		}
	}
	var file *limits.File
	if o.limitsFile != "" {
		var err error
		if file, err = limits.Load(o.limitsFile); err != nil {
			return usagef("%v", err)
		}
	}
	ctx := cmd.Context()
	log, err := g.Logger(cmd.ErrOrStderr())
	if err != nil {
		return usagef("%v", err)
	}
	op, err := g.Open(ctx)
	if err != nil {
		return err
	}
	defer op.Close()
	reg := prometheus.NewRegistry()
	obs, err := sluiceprom.New(reg)
	if err != nil {
		return err
	}
	// The console's usage history: recorded from the Client's decisions,
	// written to the store every 10 s (when it keeps usage history).
	var hopts []history.Option
	if g.Env.Clock != nil { // a test's clock; else the Recorder's cheaper wall clock
		hopts = append(hopts, history.WithClock(g.Env.Clock))
	}
	rec, err := history.New(op.Store, hopts...)
	if err != nil {
		return err
	}
	// The recorder outlives the drain and the client's Close: what the
	// calls finishing during shutdown do is recorded and written by its
	// last flush, made before the store closes (defers run in reverse).
	recCtx, stopRec := context.WithCancel(context.WithoutCancel(ctx))
	recDone := make(chan struct{})
	go func() {
		defer close(recDone)
		if err := rec.Run(recCtx); err != nil {
			log.Warn("serve.history_flush_failed", slog.String("error", err.Error()))
		}
	}()
	defer func() { stopRec(); <-recDone }()
	c, err := serveClient(ctx, g, op.Store, file, log, o.failOpen, sluice.WithObserver(sluice.Observers(obs, rec.Observer())))
	if err != nil {
		return err
	}
	defer c.Close()
	// Gauges of the buckets' state (level, fill, debt, queue, leases),
	// read from the store at most every 5 s whatever the scrapers do.
	state, err := sluiceprom.NewStateCollector(c)
	if err != nil {
		return err
	}
	if err := reg.Register(state); err != nil {
		return err
	}
	sopts := []service.Option{service.WithMaxLeases(o.maxLeases), service.WithMaxRequestBytes(o.maxBytes)}
	if authn != nil {
		sopts = append(sopts, service.WithAuth(authn))
	}
	if file != nil {
		sopts = append(sopts, service.WithProfiles(file.Profiles()))
	}
	srv, err := service.New(c, sopts...)
	if err != nil {
		return usagef("%v", err)
	}
	var rls *envoyrls.Server
	if rlsCfg != nil {
		if rls, err = envoyrls.New(c, *rlsCfg); err != nil {
			return usagef("invalid --envoy: %v", err)
		}
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	uiCtx, endUI := context.WithCancel(context.WithoutCancel(ctx))
	defer endUI()
	ui := consoleHandler(uiCtx, c, rec, authn, log)
	streamsEnd := make(chan struct{})
	hs := &http.Server{Handler: endStreams(routes(srv, rls, o.maxBytes, authn, c, reg, op.Store, ui), streamsEnd), TLSConfig: tlsCfg,
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: o.idle, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	hs.RegisterOnShutdown(endUI) // open dashboards' streams end, so that the drain does not wait for them
	hs.RegisterOnShutdown(func() { close(streamsEnd) })
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(tlsCfg == nil)
	hs.Protocols.SetHTTP2(tlsCfg != nil)
	log.Info("serve.listening", slog.String("addr", ln.Addr().String()))
	fmt.Fprintf(cmd.OutOrStdout(), "sluice serve: listening on %s\n", ln.Addr())
	if o.reconcile > 0 {
		go reconcileLoop(ctx, c, o.reconcile, log)
	}
	served := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			served <- hs.ServeTLS(ln, "", "")
			return
		}
		served <- hs.Serve(ln)
	}()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	return shutdown(hs, srv, rls, o.drain, log)
}

// serveClient builds the server's Client: from the limits file when one
// is given (its buckets re-created if the store loses them), else over the
// store's buckets as they are.
func serveClient(ctx context.Context, g *globals, st store.Store, file *limits.File, log *slog.Logger, failOpen bool, extra ...sluice.Option) (*sluice.Client, error) {
	env, err := g.Config()
	if err != nil {
		return nil, usagef("%v", err)
	}
	opts, err := g.ClientOptions(log, func(cfg *sluice.Config) {
		cfg.FailurePolicy = env.FailurePolicy // SLUICE_FAILURE_POLICY
		if failOpen {
			cfg.FailurePolicy = sluice.FailOpen
		}
	})
	if err != nil {
		return nil, err
	}
	opts = append(opts, extra...)
	if file == nil {
		return sluice.New(st, opts...)
	}
	return limits.NewClient(ctx, st, file, opts...)
}

// everyDimension is the dimension name a principal's patterns must match
// for the console and /metrics, which show every dimension: only a pattern
// that matches any name ("*") matches it.
const everyDimension = "*"

// consoleHandler is the operator console served at /ui/: read-only, and
// with --auth for the principals with the read verb on every dimension,
// who may change state (release a lease) only with the admin verb on
// every dimension.
func consoleHandler(ctx context.Context, c *sluice.Client, rec *history.Recorder, authn *auth.Authenticator, log *slog.Logger) http.Handler {
	opts := []console.Option{console.WithHistory(rec), console.WithContext(ctx), console.WithLogger(log)}
	if authn == nil {
		return console.Handler(c, opts...)
	}
	opts = append(opts, console.WithAdmin(func(r *http.Request) bool { return auth.Check(r.Context(), auth.Admin, everyDimension) == nil }))
	ui := console.Handler(c, opts...)
	return authn.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := auth.Check(r.Context(), auth.Read, everyDimension); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		ui.ServeHTTP(w, r)
	}))
}

// routes mounts the API with the health, readiness and metrics endpoints
// and the console (ui) at /ui/.
func routes(srv *service.Server, rls *envoyrls.Server, maxBytes int, authn *auth.Authenticator, c *sluice.Client, reg *prometheus.Registry, st store.Store, ui http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", srv.Handler())
	mux.Handle("/ui/", http.StripPrefix("/ui", ui))
	door := remotestore.Handler(st)
	if authn != nil {
		// Raw store access to every bucket: the admin verb on every
		// dimension, as a door scoped to some would still reach all.
		inner := door
		door = authn.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := auth.Check(r.Context(), auth.Admin, everyDimension); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
			inner.ServeHTTP(w, r)
		}))
	}
	mux.Handle(remotestore.Prefix, door)
	if rls != nil {
		path, h := rls.Handler(connect.WithReadMaxBytes(maxBytes))
		if authn != nil {
			h = authn.Middleware(h)
		}
		mux.Handle(path, h)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := c.Buckets(ctx); err != nil {
			http.Error(w, "store: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	var metrics http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if authn != nil {
		next := metrics
		metrics = authn.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := auth.Check(r.Context(), auth.Read, everyDimension); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		}))
	}
	mux.Handle("GET /metrics", metrics)
	return mux
}

// reconcileLoop reclaims expired leases every interval until ctx ends.
func reconcileLoop(ctx context.Context, c *sluice.Client, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := c.Reconcile(ctx, sluice.ReconcileOptions{}); err != nil && ctx.Err() == nil {
			log.Warn("serve.reconcile_failed", slog.String("error", err.Error()))
		}
	}
}

// endStreams ends the server's streams that never finish on their own —
// the API's Watch and the store door's WatchFreed — once end is closed,
// as a shutdown begins: the drain then waits only for calls that end.
func endStreams(h http.Handler, end <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != sluicev1connect.LimiterServiceWatchProcedure && r.URL.Path != remotestore.Prefix+"WatchFreed" {
			h.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-end:
				cancel()
			case <-ctx.Done():
			}
		}()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// shutdown stops accepting calls, lets those in flight finish within
// drain, and releases the leases the server still holds.
func shutdown(hs *http.Server, srv *service.Server, rls *envoyrls.Server, drain time.Duration, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	log.Info("serve.shutdown", slog.Int("held", srv.Held()))
	err := hs.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("serve.drain_timeout", slog.Duration("drain", drain))
		_ = hs.Close()
		err = nil
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if rerr := srv.Close(rctx); rerr != nil {
		log.Warn("serve.release_failed", slog.String("error", rerr.Error()))
	}
	if rls != nil {
		if rerr := rls.Close(rctx); rerr != nil {
			log.Warn("serve.release_failed", slog.String("error", rerr.Error()))
		}
	}
	return err
}
