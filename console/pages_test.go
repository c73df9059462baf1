package console

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// TestPages fetches every page mounted at /ui/ and checks what it shows.
func TestPages(t *testing.T) {
	f := newFixture(t)
	id := f.lease.ID()
	tests := []struct {
		path       string
		wantStatus int
		want       []string
		notWant    []string
	}{
		{"/ui/", 200, []string{`<base href="./">`, `id="row-openai#rpm"`, `href="d/openai%23rpm"`, "60/1m",
			`data-level="60"`, "1000/1m", "2 concurrent", `<td class="num leases">1</td>`, "read-only", `sse-connect="events"`,
			// live columns from the history: grants/refusals, p95, 429s by class, drift (1000 believed - 400 reported)
			"12 / 3", "≤250ms", "0 · 2 · 0", "&#43;600"}, nil},
		{"/ui", 200, []string{`<base href="./">`}, nil}, // the mux redirects to /ui/
		{"/ui/d/openai%23rpm", 200, []string{`<base href="../">`, "<h1>openai#rpm</h1>", `data-range="1h"`,
			"Calls per minute", "Callers over 1h", "<td>alice</td>", "<td>bob</td>", `hx-get="d/openai%23rpm/history?range=24h"`,
			"No live leases."}, nil},
		{"/ui/d/slots", 200, []string{"lease/" + id, "alice"}, nil},
		{"/ui/d/openai%23rpm/history?range=7d", 200, []string{`data-range="7d"`, "Tokens per hour", "Callers over 7d"}, []string{"<html"}},
		{"/ui/d/openai%23rpm?range=bogus", 200, []string{`data-range="1h"`}, nil},
		{"/ui/d/nope", 404, []string{"dimension nope"}, nil},
		{"/ui/leases", 200, []string{"Live leases", `href="lease/` + id + `?dim=slots"`, "slots:1", "alice", "1m"}, nil},
		{"/ui/leases?dim=openai%23rpm", 200, []string{"Live leases of openai#rpm", "No live leases."}, []string{id}},
		{"/ui/lease/" + id, 200, []string{`<base href="../">`, id, `href="d/slots"`, "Read-only: releasing a lease needs the admin scope"},
			[]string{"<form"}},
		{"/ui/lease/" + id + "?dim=slots", 200, []string{id, `href="d/slots"`}, nil},
		{"/ui/lease/" + id + "?dim=openai%23rpm", 404, []string{"not found on openai#rpm"}, nil},
		{"/ui/lease/" + id + "?dim=%7Bbad%7D%23rpm", 404, []string{"not found on {bad}#rpm"}, nil},
		{"/ui/lease/0b8a2b9e-6f7c-4c52-9d61-000000000000", 404, []string{"not found"}, nil},
		{"/ui/log", 200, []string{"store_error", "redis://REDACTED@10.0.0.1:6379/0?password=REDACTED"}, []string{"hunter2", "hunter3", "ops:"}},
		{"/ui/nowhere", 404, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			status, body := f.get(t, tt.path)
			if status != tt.wantStatus {
				t.Fatalf("status %d, want %d\n%s", status, tt.wantStatus, body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q:\n%s", w, body)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(body, w) {
					t.Errorf("page shows %q:\n%s", w, body)
				}
			}
		})
	}
}

// TestHeaders sends the pages with a policy that allows only the
// console's own scripts, and refuses framing.
func TestHeaders(t *testing.T) {
	f := newFixture(t)
	res, err := http.Get(f.srv.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for k, want := range map[string]string{
		"X-Frame-Options":        "DENY",
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "no-store",
	} {
		if got := res.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	policy := cspDirectives(res.Header.Get("Content-Security-Policy"))
	for k, want := range map[string]string{
		"default-src":     "'self'",
		"script-src":      "'self'",
		"style-src-attr":  "'unsafe-inline'",
		"img-src":         "'self' data:",
		"frame-ancestors": "'none'",
	} {
		if got := policy[k]; got != want {
			t.Errorf("Content-Security-Policy: %s %q, want %q", k, got, want)
		}
	}
	if style := policy["style-src"]; !strings.HasPrefix(style, "'self' ") || strings.Contains(style, "unsafe") {
		t.Errorf("Content-Security-Policy: style-src %q, want 'self' and the inlined stylesheets' hashes", style)
	}
}

// cspDirectives splits a Content-Security-Policy into its directives.
func cspDirectives(policy string) map[string]string {
	m := map[string]string{}
	for d := range strings.SplitSeq(policy, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		m[name] = value
	}
	return m
}

// TestInlineStyles: the pages' <style> elements are the embedded
// stylesheets, each allowed by its hash in the policy's style-src, and
// the pages link no stylesheet (a first visit paints without fetching
// one).
func TestInlineStyles(t *testing.T) {
	f := newFixture(t)
	styleElem := regexp.MustCompile(`(?s)<style>(.*?)</style>`)
	for path, want := range map[string][]string{
		"/ui/":                 {"assets/console.css"},
		"/ui/leases":           {"assets/console.css"},
		"/ui/d/openai%23rpm":   {"assets/console.css", "assets/vendor/uPlot.min.css"},
		"/ui/lease/nonesuch-1": {"assets/console.css"},
	} {
		res, err := http.Get(f.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		body := string(b)
		if strings.Contains(body, `rel="stylesheet"`) {
			t.Errorf("%s links a stylesheet", path)
		}
		style := " " + cspDirectives(res.Header.Get("Content-Security-Policy"))["style-src"] + " "
		got := styleElem.FindAllStringSubmatch(body, -1)
		if len(got) != len(want) {
			t.Errorf("%s: %d style elements, want %d", path, len(got), len(want))
			continue
		}
		for i, m := range got {
			css, err := fs.ReadFile(files, want[i])
			if err != nil {
				t.Fatal(err)
			}
			if m[1] != strings.TrimSpace(string(css)) {
				t.Errorf("%s: style element %d is not %s", path, i, want[i])
			}
			sum := sha256.Sum256([]byte(m[1]))
			if h := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(style, " "+h+" ") {
				t.Errorf("%s: style element %d (%s) has hash %s, not in style-src %q", path, i, want[i], h, style)
			}
		}
	}
}

// TestAssetRevalidation: an asset has an entity tag, and a request that
// presents it gets 304 Not Modified.
func TestAssetRevalidation(t *testing.T) {
	f := newFixture(t)
	url := f.srv.URL + "/ui/assets/vendor/htmx.min.js"
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	tag := res.Header.Get("ETag")
	if res.StatusCode != 200 || !strings.HasPrefix(tag, `"`) || res.Header.Get("Cache-Control") != "public, max-age=3600" {
		t.Fatalf("%d, ETag %q, Cache-Control %q", res.StatusCode, tag, res.Header.Get("Cache-Control"))
	}
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("If-None-Match", tag)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation: %d, want 304", res.StatusCode)
	}
	req.Header.Set("If-None-Match", `"stale"`)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("with another tag: %d, want 200", res.StatusCode)
	}
}

// TestAssets serves the embedded files with their types.
func TestAssets(t *testing.T) {
	f := newFixture(t)
	for path, want := range map[string]string{
		"/ui/assets/vendor/htmx.min.js":         "text/javascript",
		"/ui/assets/vendor/htmx-ext-sse.min.js": "text/javascript",
		"/ui/assets/vendor/uPlot.iife.min.js":   "text/javascript",
		"/ui/assets/vendor/uPlot.min.css":       "text/css",
		"/ui/assets/console.css":                "text/css",
		"/ui/assets/console.js":                 "text/javascript",
	} {
		res, err := http.Get(f.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get("Content-Type"); res.StatusCode != 200 || !strings.HasPrefix(got, want) {
			t.Errorf("%s: %d %q, want 200 %q", path, res.StatusCode, got, want)
		}
	}
}

// TestHistorySeries checks the charts' data: every step of the range
// present, the recorded points at their step.
func TestHistorySeries(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		rng       string
		wantN     int
		wantStep  time.Duration
		at        time.Time
		wantCalls float64
	}{
		{"1h", 60, time.Minute, t0.Truncate(time.Minute), 5},
		{"24h", 1440, time.Minute, t0.Truncate(time.Minute), 5},
		{"7d", 168, time.Hour, t0.Truncate(time.Hour), 50},
	}
	attr := regexp.MustCompile(`data-series="([^"]*)"`)
	for _, tt := range tests {
		t.Run(tt.rng, func(t *testing.T) {
			_, body := f.get(t, "/ui/d/openai%23rpm/history?range="+tt.rng)
			m := attr.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no chart:\n%s", body)
			}
			var s series
			if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &s); err != nil {
				t.Fatal(err)
			}
			if len(s.T) != tt.wantN || len(s.S) != 5 || len(s.S[0].Data) != tt.wantN {
				t.Fatalf("got %d steps, %d series, want %d steps, 5 series", len(s.T), len(s.S), tt.wantN)
			}
			if got := time.Duration(s.T[1]-s.T[0]) * time.Second; got != tt.wantStep {
				t.Errorf("step %s, want %s", got, tt.wantStep)
			}
			var got float64
			for i, ts := range s.T {
				if ts == tt.at.Unix() {
					got = s.S[0].Data[i]
				}
			}
			if got != tt.wantCalls {
				t.Errorf("grants at %s: got %v, want %v", tt.at, got, tt.wantCalls)
			}
			if last := time.Unix(s.T[len(s.T)-1], 0); last.After(t0) || t0.Sub(last) >= tt.wantStep {
				t.Errorf("last step starts at %s, want the step holding %s", last, t0)
			}
		})
	}
}

// TestNoHistory shows the pages without a history: state only.
func TestNoHistory(t *testing.T) {
	f := newFixture(t)
	f.h.hist = nil
	for path, want := range map[string]string{
		"/ui/":                      "(no history configured)",
		"/ui/d/openai%23rpm":        "No usage history",
		"/ui/log":                   "No usage history",
		"/ui/lease/" + f.lease.ID(): f.lease.ID(),
	} {
		status, body := f.get(t, path)
		if status != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d, want 200 with %q:\n%s", path, status, want, body)
		}
	}
}

// TestRedact removes secrets from messages.
func TestRedact(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"redis://u:p@h:6379/0", "redis://REDACTED@h:6379/0"},
		{"postgres://app:s3cret@db/x?sslmode=disable&password=x1", "postgres://REDACTED@db/x?sslmode=disable&password=REDACTED"},
		{"Authorization: Bearer slc_abc", "Authorization: Bearer REDACTED"},
		{"dynamodb://t?region=us-east-1", "dynamodb://t?region=us-east-1"},
		{"no secret here", "no secret here"},
		{"redis://u:p@ss@h:6379/0 and redis://h2", "redis://REDACTED@h:6379/0 and redis://h2"}, // an @ in the password
	} {
		if got := redact(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestP95 reads the 95th percentile off a wait histogram.
func TestP95(t *testing.T) {
	over := make([]int64, len(waitBounds)+1)
	over[len(waitBounds)] = 1
	for _, tt := range []struct {
		hist []int64
		want string
	}{
		{nil, ""},
		{[]int64{100}, "≤10ms"},
		{[]int64{95, 5}, "≤10ms"},
		{[]int64{94, 6}, "≤50ms"},
		{over, ">1m"},
	} {
		if got := p95(tt.hist); got != tt.want {
			t.Errorf("p95(%v) = %q, want %q", tt.hist, got, tt.want)
		}
	}
}

// TestDur formats durations compactly.
func TestDur(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{850 * time.Millisecond, "850ms"},
		{12300 * time.Millisecond, "12.3s"},
		{time.Minute, "1m"},
		{90 * time.Second, "1m30s"},
		{2 * time.Hour, "2h"},
		{2*time.Hour + 5*time.Minute + 9*time.Second, "2h5m"},
		{7 * 24 * time.Hour, "168h"},
		{-3 * time.Second, "-3s"},
	} {
		if got := dur(tt.d); got != tt.want {
			t.Errorf("dur(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// TestRate formats limits as the CLI does.
func TestRate(t *testing.T) {
	for _, tt := range []struct {
		c    bucket.Config
		want string
	}{
		{bucket.PerPeriod(bucket.Requests, 60, time.Minute), "60/1m"},
		{bucket.Config{Type: bucket.Tokens, Capacity: 39200, RefillAmount: 40000, RefillPeriod: 61225 * time.Millisecond}, "40000/1m1.225s burst 39200"},
		{bucket.PerPeriod(bucket.Requests, 1000, time.Hour), "1000/1h"},
		{bucket.ConcurrentSlots(5), "5 concurrent"},
	} {
		if got := rate(tt.c); got != tt.want {
			t.Errorf("rate(%+v) = %q, want %q", tt.c, got, tt.want)
		}
	}
}

// TestStoreDown shows a store failure on the overview, in the page and
// the stream, without the secrets its message holds.
func TestStoreDown(t *testing.T) {
	f := newFixture(t)
	down := fmt.Errorf("dial redis://app:hunter2@10.1.2.3:6379/0: %w", store.ErrUnavailable)
	f.st.fail.Store(&down)
	status, body := f.get(t, "/ui/")
	if status != 200 || !strings.Contains(body, "Store unavailable: ") || !strings.Contains(body, "redis://REDACTED@10.1.2.3:6379/0") {
		t.Errorf("overview with the store down: %d\n%s", status, body)
	}
	s := openStream(t, context.Background(), f.srv.URL+"/ui/events")
	e := s.next(t)
	if !strings.Contains(e.data, "Store unavailable: ") {
		t.Errorf("event with the store down:\n%s", e.data)
	}
	for _, text := range []string{body, e.data} {
		if strings.Contains(text, "hunter2") {
			t.Errorf("the password shows:\n%s", text)
		}
	}
}

// TestMountedElsewhere serves the console at the root of a server and
// under a deeper prefix: the links are relative to the page, whatever
// the prefix.
func TestMountedElsewhere(t *testing.T) {
	f := newFixture(t)
	for _, tt := range []struct {
		prefix, path, wantBase string
	}{
		{"", "/", "./"},
		{"", "/d/slots", "../"},
		{"/ops/sluice", "/ops/sluice/", "./"},
		{"/ops/sluice", "/ops/sluice/leases", "./"},
		{"/ops/sluice", "/ops/sluice/d/openai%23rpm", "../"},
		{"/ops/sluice", "/ops/sluice/lease/" + f.lease.ID(), "../"},
	} {
		var h http.Handler = f.h
		if tt.prefix != "" {
			mux := http.NewServeMux()
			mux.Handle(tt.prefix+"/", http.StripPrefix(tt.prefix, f.h))
			h = mux
		}
		srv := httptest.NewServer(h)
		res, err := http.Get(srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		srv.Close()
		if want := `<base href="` + tt.wantBase + `">`; res.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s at %s: %d, want 200 with %s", tt.path, tt.prefix, res.StatusCode, want)
		}
	}
}

// TestQueue: the overview's queue column shows who waits for a concurrent
// bucket's slots, and how far a rate bucket's reservations reach.
func TestQueue(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	conc := bucket.Config{Type: bucket.Concurrent, Capacity: 2}
	rate := bucket.Config{Type: bucket.Requests, Capacity: 60, RefillAmount: 60, RefillPeriod: time.Minute}
	tests := []struct {
		name string
		s    sluice.BucketState
		want string
	}{
		{"slots, nobody waits", sluice.BucketState{Bucket: sluice.Bucket{Name: "c", Config: conc}, Now: now}, ""},
		{"slots, three wait", sluice.BucketState{Bucket: sluice.Bucket{Name: "c", Config: conc}, Now: now, Waiters: 3}, "3 waiting"},
		{"rate, no reservation", sluice.BucketState{Bucket: sluice.Bucket{Name: "r", Config: rate}, Now: now}, ""},
		{"rate, reservations past", sluice.BucketState{Bucket: sluice.Bucket{Name: "r", Config: rate}, Now: now, ReservedUntil: now.Add(-time.Second)}, ""},
		{"rate, 2.5 s of reservations", sluice.BucketState{Bucket: sluice.Bucket{Name: "r", Config: rate}, Now: now, ReservedUntil: now.Add(2500 * time.Millisecond)}, "2.5s"},
	}
	for _, tt := range tests {
		if got := rowOf(tt.s, nil).Queue; got != tt.want {
			t.Errorf("%s: queue %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestLeasePageReadsOneDimension: a lease's link carries one of its
// dimensions, and its page reads only that dimension's leases, not every
// lease of the fleet; a link without it reads them all.
func TestLeasePageReadsOneDimension(t *testing.T) {
	f := newFixture(t)
	id := f.lease.ID()
	for _, tt := range []struct {
		path, want string
	}{
		{"/ui/lease/" + id + "?dim=slots", "slots"},
		{"/ui/lease/" + id, ""},
	} {
		f.st.mu.Lock()
		f.st.leaseDims = nil
		f.st.mu.Unlock()
		if status, body := f.get(t, tt.path); status != 200 || !strings.Contains(body, id) {
			t.Fatalf("%s: %d", tt.path, status)
		}
		f.st.mu.Lock()
		got := slices.Clone(f.st.leaseDims)
		f.st.mu.Unlock()
		if len(got) != 1 || got[0] != tt.want {
			t.Errorf("%s: the store's Leases calls asked for dimensions %q, want one for %q", tt.path, got, tt.want)
		}
	}
}
