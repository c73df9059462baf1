package cli

import (
	"bufio"
	"cmp"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
	"github.com/ontopix/sluice/service/gen/sluice/v1/sluicev1connect"
)

// TestServeConsole runs serve on the memory store and opens the console
// at /ui: the overview shows the slot a caller took and the history's
// grant, the event stream sends the rows, a release is refused (no
// --auth: read-only), and an open stream does not hold the shutdown up.
func TestServeConsole(t *testing.T) {
	e := memEnv(t)
	file := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(file, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, e, "--limits", file, "--drain", "20s")
	base := "http://" + srv.addr
	waitHealthy(t, base+"/healthz", srv.done)
	c := sluicev1connect.NewLimiterServiceClient(http.DefaultClient, base)
	res, err := c.Acquire(context.Background(), connect.NewRequest(&sluicev1.AcquireRequest{Items: []*sluicev1.Item{{Dimension: "v#slots", Cost: 1}}}))
	if err != nil || !res.Msg.GetGranted() {
		t.Fatalf("acquire: %v %v", res, err)
	}
	for _, path := range []string{"/ui/", "/ui"} {
		page := get(t, base+path)
		for _, want := range []string{`<base href="./">`, `data-level="1"`, `<td class="num leases">1</td>`, "1 / 0", "read-only"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s lacks %q:\n%s", path, want, page)
			}
		}
	}
	if page := get(t, base+"/ui/leases"); !strings.Contains(page, "v#slots:1") {
		t.Errorf("/ui/leases lacks the lease:\n%s", page)
	}

	resp, err := http.Get(base + "/ui/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var got string
	for sc.Scan() && !strings.Contains(got, `id="row-v#slots"`) {
		got += sc.Text() + "\n"
	}
	if !strings.Contains(got, "event: overview") || !strings.Contains(got, `id="row-v#slots"`) {
		t.Errorf("/ui/events sent:\n%s", got)
	}

	post, err := http.Post(base+"/ui/lease/00000000-0000-4000-8000-000000000000/release", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusForbidden {
		t.Errorf("release without --auth: %d, want 403", post.StatusCode)
	}

	r := srv.stop() // the stream is still open
	if r.code != 0 || strings.Contains(r.errs, "serve.drain_timeout") {
		t.Errorf("serve with an open dashboard exited %d; stderr:\n%s", r.code, r.errs)
	}
}

// TestServeConsoleAuth runs serve with --auth: the console needs a
// principal with the read verb, and a release needs the admin verb, both
// on every dimension ("*"): the console shows them all.
func TestServeConsoleAuth(t *testing.T) {
	e := memEnv(t)
	dir := t.TempDir()
	file, authFile := filepath.Join(dir, "limits.yaml"), filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(file, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	principal := func(name, verbs string, dims ...string) (token, entry string) {
		out := e.ok("serve", "token", "--name", name, "--verbs", verbs, "--dimensions", cmp.Or(strings.Join(dims, ","), "*"))
		token = strings.TrimSpace(strings.SplitN(strings.SplitN(out, "): ", 2)[1], "\n", 2)[0])
		return token, out[strings.Index(out, "principals:\n")+len("principals:\n"):]
	}
	reader, readEntry := principal("viewer", "read")
	admin, adminEntry := principal("ops", "admin")
	acquirer, acquireEntry := principal("app", "acquire")
	// Scoped to some dimensions: the console shows them all, so neither
	// may use it.
	teamReader, teamReadEntry := principal("team-viewer", "read", "v#*")
	teamAdmin, teamAdminEntry := principal("team-ops", "admin,read", "v#*")
	if err := os.WriteFile(authFile, []byte("principals:\n"+readEntry+adminEntry+acquireEntry+teamReadEntry+teamAdminEntry), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, e, "--limits", file, "--auth", authFile)
	base := "http://" + srv.addr
	waitHealthy(t, base+"/healthz", srv.done)

	c := sluicev1connect.NewLimiterServiceClient(http.DefaultClient, base)
	req := connect.NewRequest(&sluicev1.AcquireRequest{Items: []*sluicev1.Item{{Dimension: "v#slots", Cost: 1}}})
	req.Header().Set("Authorization", "Bearer "+acquirer)
	res, err := c.Acquire(context.Background(), req)
	if err != nil || !res.Msg.GetGranted() {
		t.Fatalf("acquire: %v %v", res, err)
	}
	// The service's handle is the store's lease id, a dot and a secret
	// suffix; the console knows leases by the store's id.
	id, _, _ := strings.Cut(res.Msg.GetLease().GetId(), ".")

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(method, path, token string) int {
		req, _ := http.NewRequest(method, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	release := "/ui/lease/" + id + "/release"
	for _, tt := range []struct {
		method, path, who, token string
		want                     int
	}{
		{"GET", "/ui/", "nobody", "", http.StatusUnauthorized},
		{"GET", "/ui/", "an acquirer", acquirer, http.StatusForbidden},
		{"GET", "/ui/", "a reader", reader, http.StatusOK},
		{"GET", "/ui/", "a reader of v#* only", teamReader, http.StatusForbidden},
		{"POST", release, "an admin of v#* only", teamAdmin, http.StatusForbidden},
		{"GET", "/ui/lease/" + id, "a reader", reader, http.StatusOK},
		{"POST", release, "a reader", reader, http.StatusForbidden},
		{"POST", release, "an admin", admin, http.StatusSeeOther},
		{"GET", "/ui/lease/" + id, "an admin, after the release", admin, http.StatusNotFound},
	} {
		if got := call(tt.method, tt.path, tt.token); got != tt.want {
			t.Errorf("%s %s by %s: %d, want %d", tt.method, tt.path, tt.who, got, tt.want)
		}
	}
}
