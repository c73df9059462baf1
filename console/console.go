// Package console serves Sluice's operator console: a live dashboard of the
// limiter's state, read from a *sluice.Client, with the usage history a
// history.Recorder keeps.
//
// The console has five pages, rendered on the server with html/template:
//
//   - the fleet overview, one row per dimension (level against capacity,
//     debt, leases held, cooldown and, with a history, the last minute's
//     grants, refusals, wait p95, vendor 429s by class and the drift
//     between Sluice's balance and the vendor's reported remaining),
//     refreshed over server-sent events;
//   - a dimension's page: its state, its history over 1 h, 24 h or 7 d as
//     charts, its usage per caller and its live leases;
//   - the live leases, with their age and time to live, and a page per lease;
//   - the event log (cooldowns, limit changes, reconciles, store errors).
//
// The front-end libraries (htmx, its SSE extension and uPlot) are embedded;
// nothing is fetched from elsewhere and nothing needs building.
//
// The console is read-only unless WithAdmin says a request may change
// state; it never renders a secret (URLs in errors lose their user
// information and password parameters).
//
// Mount it under any path with http.StripPrefix; its links are relative,
// so it works behind a proxy that adds a further prefix:
//
//	mux.Handle("/ui/", http.StripPrefix("/ui", console.Handler(client)))
package console

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ontopix/sluice"
)

//go:embed assets templates
var files embed.FS

// DefaultInterval is how often the overview is refreshed for open
// dashboards: one state read per interval, shared by all of them.
const DefaultInterval = time.Second

// Option configures Handler.
type Option func(*handler)

// WithInterval sets how often the overview is pushed to open dashboards;
// the default is DefaultInterval, and values under 100 ms are raised to it.
func WithInterval(d time.Duration) Option {
	return func(h *handler) {
		if d < 100*time.Millisecond {
			d = 100 * time.Millisecond
		}
		h.interval = d
	}
}

// WithAdmin lets the requests for which allow returns true change state
// (release a lease). Without it the console is read-only. allow is called
// on every page view (to show or hide the actions) and on every action,
// concurrently; it must be fast. Actions are also refused when they come
// from another origin (see http.CrossOriginProtection).
func WithAdmin(allow func(*http.Request) bool) Option {
	return func(h *handler) { h.admin = allow }
}

// WithContext bounds the console's life: when ctx ends, the open
// dashboards' live streams end and the refresh stops. A server passes a
// context it cancels at shutdown (http.Server.RegisterOnShutdown), since
// an event stream never ends on its own. Without it the streams end only
// when their clients leave.
func WithContext(ctx context.Context) Option {
	return func(h *handler) { h.ctx = ctx }
}

// WithLogger logs the console's failures (a store read that failed, a
// template that could not render) at warning level; the default discards
// them. Pages show the same failures, without secrets.
func WithLogger(l *slog.Logger) Option {
	return func(h *handler) {
		if l != nil {
			h.log = l
		}
	}
}

// handler is the console: its pages, its event stream and the hub that
// shares one state read per interval among the open streams.
type handler struct {
	c        *sluice.Client
	hist     historian
	interval time.Duration
	admin    func(*http.Request) bool
	ctx      context.Context
	log      *slog.Logger
	now      func() time.Time
	pages    map[string]*template.Template
	rows     *template.Template
	hub      *hub
	// maxStreams bounds the open event streams (maxStreams; tests lower it).
	maxStreams int
	mux        *http.ServeMux
	gz         gzipPool
	// newTicker makes the hub's ticker; tests replace it to tick by hand.
	newTicker func(time.Duration) (<-chan time.Time, func())
}

// Handler returns the console over c. It is safe for concurrent use;
// open dashboards share one state read per interval (WithInterval).
func Handler(c *sluice.Client, opts ...Option) http.Handler {
	return newHandler(c, opts...)
}

func newHandler(c *sluice.Client, opts ...Option) *handler {
	h := &handler{c: c, interval: DefaultInterval, ctx: context.Background(),
		log: slog.New(slog.DiscardHandler), now: time.Now, newTicker: realTicker}
	for _, o := range opts {
		o(h)
	}
	h.parse()
	h.hub = newHub(h)
	h.maxStreams = maxStreams
	h.routes()
	return h
}

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func (h *handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /assets/", serveAsset)
	m.HandleFunc("GET /{$}", h.overview)
	m.HandleFunc("GET /events", h.events)
	m.HandleFunc("GET /d/{dim}", h.dimension)
	m.HandleFunc("GET /d/{dim}/history", h.historyFragment)
	m.HandleFunc("GET /leases", h.leases)
	m.HandleFunc("GET /lease/{id}", h.lease)
	m.Handle("POST /lease/{id}/release", http.NewCrossOriginProtection().Handler(http.HandlerFunc(h.release)))
	m.HandleFunc("GET /log", h.eventLog)
	h.mux = m
}

// ServeHTTP serves the console's pages; r's path is relative to where the
// console is mounted.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "" {
		// Mounted with StripPrefix("/ui/"): the console's root.
		r2 := *r
		u := *r.URL
		u.Path, u.RawPath = "/", ""
		r2.URL = &u
		r = &r2
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", csp)
	w.Header().Set("Referrer-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

// The console's stylesheets are inlined in the pages' heads (uPlot's in
// the chart pages only), so that a first visit paints without waiting for
// them.
var (
	consoleCSS = inlineStyle("assets/console.css")
	chartCSS   = inlineStyle("assets/vendor/uPlot.min.css")
)

// csp is the pages' Content-Security-Policy: scripts only from the
// console's own files; style elements only from its own files or with the
// hash of an inlined stylesheet; style attributes allowed (the fill bars,
// the charts' layout).
var csp = "default-src 'self'; script-src 'self'; style-src 'self' " + consoleCSS.hash + " " + chartCSS.hash +
	"; style-src-attr 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"

// style is an embedded stylesheet as a <style> element, and the source
// expression ('sha256-…') that allows it.
type style struct {
	elem template.HTML
	hash string
}

func inlineStyle(path string) style {
	b, err := fs.ReadFile(files, path)
	if err != nil {
		panic(err)
	}
	css := strings.TrimSpace(string(b))
	if strings.Contains(css, "</") {
		panic("console: " + path + " cannot be inlined in a <style> element")
	}
	sum := sha256.Sum256([]byte(css))
	return style{elem: template.HTML("<style>" + css + "</style>"), hash: "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"}
}

// base returns the relative link from r's page to the console's root
// ("./" or "../"), for the page's <base href>.
func base(r *http.Request) string {
	depth := strings.Count(r.URL.EscapedPath(), "/") - 1
	if depth <= 0 {
		return "./"
	}
	return strings.Repeat("../", depth)
}

// isAdmin reports whether r may change state.
func (h *handler) isAdmin(r *http.Request) bool {
	return h.admin != nil && h.admin(r)
}
