package console

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/history"
)

// page is what the layout renders around a page's content.
type page struct {
	Base, Title, Nav string
	Admin            bool
	Charts           bool
	Data             any
}

var funcs = template.FuncMap{
	"dur": dur,
	"ts":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"esc": url.PathEscape,
	// The inlined stylesheets (see csp).
	"consoleCSS": func() template.HTML { return consoleCSS.elem },
	"chartCSS":   func() template.HTML { return chartCSS.elem },
}

// parse loads the templates: one set per page, each with the layout and
// the overview's rows.
func (h *handler) parse() {
	h.pages = map[string]*template.Template{}
	for _, name := range []string{"overview", "dimension", "leases", "lease", "log", "error"} {
		h.pages[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(files,
			"templates/layout.html", "templates/fragments.html", "templates/"+name+".html"))
	}
	h.rows = h.pages["overview"]
}

// render writes a whole page, or a 500 if its template fails (into a
// buffer first, so that a failure never leaves half a page).
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.Base = base(r)
	p.Admin = h.isAdmin(r)
	if p.Nav == "" {
		p.Nav = name
	}
	var b bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		h.log.Warn("console.render_failed", "page", name, "error", err.Error())
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	h.writeBody(w, r, status, b.Bytes())
}

// fail renders the error page with a message free of secrets.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, status, "error", page{Title: http.StatusText(status), Nav: "-", Data: redact(msg)})
}

func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Data: h.snapshot(r.Context())})
}

// dimensionData is a dimension's page.
type dimensionData struct {
	Row     row
	Live    *history.Counts
	History historyData
	Leases  []leaseRow
	More    bool
}

func (h *handler) dimension(w http.ResponseWriter, r *http.Request) {
	dim := r.PathValue("dim")
	ctx := r.Context()
	st, err := h.c.Peek(ctx, dim)
	if err != nil {
		status := http.StatusServiceUnavailable
		if errors.Is(err, sluice.ErrUnknownDimension) {
			status = http.StatusNotFound
		}
		h.fail(w, r, status, "dimension "+dim+": "+err.Error())
		return
	}
	d := dimensionData{History: h.history(ctx, dim, r.URL.Query().Get("range"))}
	if h.hist != nil {
		c := h.hist.Live(dim)
		d.Live = &c
	}
	d.Row = rowOf(st[0], d.Live)
	const most = 100
	ls, err := h.c.Leases(ctx, sluice.LeaseQuery{Dimension: dim, Limit: most + 1})
	if err == nil {
		d.More = len(ls) > most
		d.Leases = h.leaseRows(ls[:min(len(ls), most)])
	}
	h.render(w, r, http.StatusOK, "dimension", page{Title: dim, Nav: "overview", Charts: true, Data: d})
}

// historyFragment serves a dimension's history section alone, for a
// range switch without reloading the page.
func (h *handler) historyFragment(w http.ResponseWriter, r *http.Request) {
	d := h.history(r.Context(), r.PathValue("dim"), r.URL.Query().Get("range"))
	var b bytes.Buffer
	if err := h.pages["dimension"].ExecuteTemplate(&b, "history", d); err != nil {
		h.log.Warn("console.render_failed", "page", "history", "error", err.Error())
		http.Error(w, "the history could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	h.writeBody(w, r, http.StatusOK, b.Bytes())
}

// leaseRow is a lease formatted for display.
type leaseRow struct {
	ID, Caller, Dims string
	Dim              string // the first dimension: the lease page's hint
	Age, TTL         string
	Expired          bool
	Created, Expires time.Time
	Items            []sluice.Request
}

func (h *handler) leaseRows(ls []sluice.LeaseRecord) []leaseRow {
	now := h.now()
	out := make([]leaseRow, len(ls))
	for i, l := range ls {
		parts := make([]string, len(l.Dimensions))
		for j, d := range l.Dimensions {
			parts[j] = d.Dimension + ":" + itoa(d.Cost)
		}
		var first string
		if len(l.Dimensions) > 0 {
			first = l.Dimensions[0].Dimension
		}
		out[i] = leaseRow{ID: l.ID, Caller: l.Caller, Dims: strings.Join(parts, " "), Dim: first, Age: dur(now.Sub(l.CreatedAt)),
			TTL: dur(l.ExpiresAt.Sub(now)), Expired: !l.ExpiresAt.After(now), Created: l.CreatedAt, Expires: l.ExpiresAt, Items: l.Dimensions}
	}
	return out
}

// leasesData is the live leases page.
type leasesData struct {
	Dimension string
	Leases    []leaseRow
	More      bool
	Released  string
	Err       string
}

// mostLeases bounds the leases page.
const mostLeases = 1000

func (h *handler) leases(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := leasesData{Dimension: q.Get("dim"), Released: q.Get("released")}
	ls, err := h.c.Leases(r.Context(), sluice.LeaseQuery{Dimension: d.Dimension, Limit: mostLeases + 1})
	if err != nil {
		d.Err = redact(err.Error())
	}
	d.More = len(ls) > mostLeases
	d.Leases = h.leaseRows(ls[:min(len(ls), mostLeases)])
	h.render(w, r, http.StatusOK, "leases", page{Title: "Leases", Data: d})
}

// findLease finds a lease by id among the leases of dim (one of its
// dimensions: the links of the console's pages carry it), or among all
// leases when dim is empty.
func (h *handler) findLease(ctx context.Context, id, dim string) (leaseRow, bool, error) {
	ls, err := h.c.Leases(ctx, sluice.LeaseQuery{Dimension: dim})
	if err != nil {
		return leaseRow{}, false, err
	}
	for _, l := range ls {
		if l.ID == id {
			return h.leaseRows([]sluice.LeaseRecord{l})[0], true, nil
		}
	}
	return leaseRow{}, false, nil
}

func (h *handler) lease(w http.ResponseWriter, r *http.Request) {
	id, dim := r.PathValue("id"), r.URL.Query().Get("dim")
	l, ok, err := h.findLease(r.Context(), id, dim)
	switch {
	case errors.Is(err, sluice.ErrInvalid):
		h.fail(w, r, http.StatusBadRequest, "leases: "+err.Error())
	case err != nil:
		h.fail(w, r, http.StatusServiceUnavailable, "leases: "+err.Error())
	case !ok && dim != "":
		h.fail(w, r, http.StatusNotFound, "lease "+id+" not found on "+dim+": released, reclaimed or never granted")
	case !ok:
		h.fail(w, r, http.StatusNotFound, "lease "+id+" not found: released, reclaimed or never granted")
	default:
		h.render(w, r, http.StatusOK, "lease", page{Title: "Lease " + id, Nav: "leases", Data: l})
	}
}

// release releases a lease by id, for an admin only.
func (h *handler) release(w http.ResponseWriter, r *http.Request) {
	if !h.isAdmin(r) {
		h.fail(w, r, http.StatusForbidden, "releasing a lease needs the admin scope; the console is read-only for you")
		return
	}
	id := r.PathValue("id")
	if _, err := h.c.ReleaseLease(r.Context(), id); err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, sluice.ErrInvalid) {
			status = http.StatusBadRequest
		}
		h.fail(w, r, status, "release "+id+": "+err.Error())
		return
	}
	h.log.Info("console.lease_released", "lease", id)
	// A relative Location: the console does not know where it is mounted.
	w.Header().Set("Location", "../../leases?released="+url.QueryEscape(id))
	w.WriteHeader(http.StatusSeeOther)
}

// logData is the event log page.
type logData struct {
	Hist   bool
	Events []history.Event
}

// mostEvents bounds the event log page.
const mostEvents = 500

func (h *handler) eventLog(w http.ResponseWriter, r *http.Request) {
	d := logData{Hist: h.hist != nil}
	if h.hist != nil {
		d.Events = h.hist.Events(mostEvents)
		for i := range d.Events {
			d.Events[i].Detail = redact(d.Events[i].Detail)
		}
	}
	h.render(w, r, http.StatusOK, "log", page{Title: "Events", Data: d})
}

// callerRow is one caller's usage over a range.
type callerRow struct {
	Caller                      string
	Grants, Refusals, Waits     int64
	AvgWait, P95                string
	Reserved, Settled, Debt     int64
	R429, Errors, Degraded, Unm int64
}

func callerRows(m map[string]history.Counts) []callerRow {
	out := make([]callerRow, 0, len(m))
	for name, c := range m {
		cr := callerRow{Caller: name, Grants: c.Grants, Refusals: c.Refusals, Waits: c.Waits, P95: p95(c.WaitHist),
			Reserved: c.Reserved, Settled: c.Settled, Debt: c.Debt, Errors: c.Errors, Degraded: c.Degraded, Unm: c.Unmetered,
			R429: c.Responses["429_requests"] + c.Responses["429_tokens"] + c.Responses["429_other"]}
		if c.Waits > 0 {
			cr.AvgWait = dur(c.WaitSum / time.Duration(c.Waits))
		}
		if name == "" {
			cr.Caller = "(unnamed)"
		}
		out = append(out, cr)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Settled+a.Reserved != b.Settled+b.Reserved {
			return a.Settled+a.Reserved > b.Settled+b.Reserved
		}
		if a.Grants != b.Grants {
			return a.Grants > b.Grants
		}
		return a.Caller < b.Caller
	})
	return out
}
