package console

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/store/memstore"
)

// chromium returns the browser the test drives: $SLUICE_CHROMIUM, else
// chromium on PATH or in /usr/bin. Without one the test fails in CI
// (CI=true) and is skipped elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("SLUICE_CHROMIUM"), "chromium", "/usr/bin/chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is required in CI for the browser test: apt-get install chromium (or set SLUICE_CHROMIUM)")
	}
	t.Skip("no chromium: install it (apt-get install chromium) or set SLUICE_CHROMIUM to run the browser test")
	return ""
}

// artifacts is where screenshots go: $SLUICE_ARTIFACTS, else a temporary
// directory.
func artifacts(t *testing.T) string {
	if d := os.Getenv("SLUICE_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// browser starts a headless chromium with a fresh profile and returns its
// context, and the console messages it collects.
func browser(t *testing.T) (context.Context, func() []string) {
	path := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // start the browser, with no deadline
		t.Fatalf("starting %s: %v", path, err)
	}
	var mu sync.Mutex
	var errs []string
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				errs = append(errs, m.String()+" at "+m.URL)
				mu.Unlock()
			}
		}
	}()
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}

// load runs workers that take and give back slots and requests until ctx
// ends.
func load(ctx context.Context, c *sluice.Client, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			caller := fmt.Sprintf("worker-%d", i)
			for ctx.Err() == nil {
				res, err := c.AcquireMany(ctx, []sluice.Request{{Dimension: "load#slots", Cost: 1}, {Dimension: "load#rpm", Cost: 1}}, sluice.WithCaller(caller))
				if err == nil && res.Granted() {
					sleep(ctx, time.Duration(50+rand.IntN(400))*time.Millisecond)
					_ = res.Lease.Release(context.Background())
				}
				sleep(ctx, time.Duration(20+rand.IntN(80))*time.Millisecond)
			}
		})
	}
	return &wg
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// TestBrowser drives the console in headless chromium against a memory
// store under load: the overview's level of a dimension changes live, a
// lease's page opens from the leases page, a dimension's history switches
// range; no console errors; screenshots saved.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium: not a unit test")
	}
	ctx, consoleErrors := browser(t)
	dir := artifacts(t)

	st := memstore.New()
	rec, err := history.New(st, history.WithFlushEvery(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sluice.New(st, sluice.WithObserver(rec.Observer()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	bg := context.Background()
	for _, b := range []sluice.Bucket{
		{Name: "load#slots", Config: bucket.ConcurrentSlots(6)},
		{Name: "load#rpm", Config: bucket.PerPeriod(bucket.Requests, 600, time.Minute)},
		{Name: "held#slots", Config: bucket.ConcurrentSlots(2)},
	} {
		if err := c.PutBucket(bg, b); err != nil {
			t.Fatal(err)
		}
	}
	stuck, err := c.Acquire(bg, "held#slots", sluice.WithCaller("stuck-worker"), sluice.WithTTL(time.Hour))
	if err != nil || !stuck.Granted() {
		t.Fatalf("acquire: %v %v", stuck, err)
	}
	lctx, stop := context.WithCancel(bg)
	wg := load(lctx, c, 8)
	t.Cleanup(func() { stop(); wg.Wait() })

	rctx, stopRec := context.WithCancel(bg)
	recDone := make(chan struct{})
	go func() { defer close(recDone); _ = rec.Run(rctx) }()
	t.Cleanup(func() { stopRec(); <-recDone })
	mux := http.NewServeMux()
	hctx, endStreams := context.WithCancel(bg)
	mux.Handle("/ui/", http.StripPrefix("/ui", newHandler(c, WithHistory(rec), WithInterval(250*time.Millisecond), WithContext(hctx))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(endStreams) // before srv.Close, which waits for the streams

	step := func(name string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, a); err != nil {
			html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
			t.Fatalf("%s: %v\nconsole errors: %q\npage:\n%s", name, err, consoleErrors(), html)
		}
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}

	// The overview: load#slots's level changes without a reload.
	const level = `document.querySelector('tr[data-dimension="load#slots"] .level').dataset.level`
	step("overview", chromedp.Steps(
		chromedp.Navigate(srv.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-dimension="load#slots"]`)),
	))
	first, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.sluiceMark = 1; `+level))
	if err != nil {
		t.Fatal(err)
	}
	step("level change", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[bool](fmt.Sprintf(`window.sluiceMark === 1 && %s !== %q`, level, first),
			chromedp.WithPollingInterval(50*time.Millisecond))(ctx, tg)
		return err
	}))
	shot("console-overview.png")

	// The leases page, then the stuck lease's page.
	id := stuck.Lease.ID()
	step("lease", chromedp.Steps(
		chromedp.Click(chromedp.CSS(`header a[href="leases"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a.lease[href^="lease/`+id+`?dim="]`)),
		chromedp.Click(chromedp.CSS(`a.lease[href^="lease/`+id+`?dim="]`)),
		chromedp.WaitVisible(chromedp.ID("lease-id")),
	))
	got, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("lease-id")))
	if err != nil || got != id {
		t.Errorf("lease page shows %q (%v), want %s", got, err, id)
	}
	body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
	if !strings.Contains(body, "stuck-worker") {
		t.Errorf("lease page lacks its caller:\n%s", body)
	}

	// A dimension's history: charts drawn, the range switched to 24h in
	// place, the workers among its callers.
	step("dimension", chromedp.Steps(
		chromedp.Navigate(srv.URL+"/ui/d/load%23slots"),
		chromedp.WaitVisible(chromedp.CSS(`#history[data-range="1h"] .chart[data-drawn] canvas`)),
		chromedp.Evaluate[chromedp.Void](`window.sluiceMark = 2`),
		chromedp.Click(chromedp.CSS(`.ranges a[data-range="24h"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#history[data-range="24h"] .chart[data-drawn] canvas`)),
	))
	if mark, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.sluiceMark`)); err != nil || mark != 2 {
		t.Errorf("the range switch reloaded the page (mark %d, %v), want it swapped in place", mark, err)
	}
	callers, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("table.callers")))
	if !strings.Contains(callers, "worker-") {
		t.Errorf("the callers table lacks the workers:\n%s", callers)
	}
	shot("console-dimension.png")

	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// firstPaint is the current document's first contentful paint, in ms
// from the start of its navigation, once the browser has reported it (-1
// if it has not in 5 s).
const firstPaint = `new Promise(done => {
  const fcp = list => list.getEntriesByName("first-contentful-paint").forEach(e => done(e.startTime));
  new PerformanceObserver(fcp).observe({type: "paint", buffered: true});
  setTimeout(() => done(-1), 5000);
})`

// TestBrowserFirstPaint loads the overview of 100 dimensions and 1,000
// live leases and reports the first contentful paint the browser measured
// (logged, not asserted: a unit test makes no timing claims).
func TestBrowserFirstPaint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium: not a unit test")
	}
	ctx, consoleErrors := browser(t)
	f := bigFixture(t)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The browser's first page pays for starting a renderer: open a blank
	// one first, and let the browser finish starting (settle). The first
	// visit then fetches the assets; the second is what an operator
	// opening the console again sees.
	if err := chromedp.Do(sctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	settle(sctx)
	for i := range 2 {
		if err := chromedp.Do(sctx, chromedp.Navigate(f.srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-dimension="vendor96#slots"]`))); err != nil {
			t.Fatal(err)
		}
		fcp, err := chromedp.Run(sctx, chromedp.Evaluate[float64](firstPaint, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("visit %d: first contentful paint %.0f ms (100 dimensions, 1,000 leases)", i+1, fcp)
	}
	// The floor: a one-line page on another site (127.0.0.2), visited the
	// same way in a new tab: what any first visit costs in this browser.
	if l, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Logf("floor not measured: %v", err)
	} else {
		floor := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, "<!doctype html><title>floor</title><p>Sluice</p>")
		})}}
		floor.Start()
		defer floor.Close()
		tctx, closeTab := chromedp.NewContext(sctx)
		defer closeTab()
		if err := chromedp.Do(tctx, chromedp.Navigate("about:blank")); err != nil {
			t.Fatal(err)
		}
		settle(tctx)
		if err := chromedp.Do(tctx, chromedp.Navigate(floor.URL)); err != nil {
			t.Fatal(err)
		}
		fcp, err := chromedp.Run(tctx, chromedp.Evaluate[float64](firstPaint, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("floor: first contentful paint %.0f ms (a one-line page, first visit, new tab)", fcp)
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
