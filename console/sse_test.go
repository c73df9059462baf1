package console

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
)

// event is one parsed server-sent event.
type event struct{ name, data string }

// stream reads the server-sent events of one response.
type stream struct {
	res *http.Response
	ch  chan event
}

func openStream(t testing.TB, ctx context.Context, url string) *stream {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %q, want 200 text/event-stream", res.StatusCode, ct)
	}
	s := &stream{res: res, ch: make(chan event, 100)}
	go s.read()
	t.Cleanup(func() { res.Body.Close() })
	return s
}

// read parses the stream as the EventSource specification says: fields
// up to a blank line, data lines joined with "\n".
func (s *stream) read() {
	defer close(s.ch)
	sc := bufio.NewScanner(s.res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != nil {
				s.ch <- event{name: name, data: strings.Join(data, "\n")}
			}
			name, data = "", nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			data = append(data, value)
		}
	}
}

func (s *stream) next(t testing.TB) event {
	t.Helper()
	select {
	case e, ok := <-s.ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return event{}
}

// TestEvents reads the overview's rows from the stream, takes a slot, and
// sees the level change at the next tick.
func TestEvents(t *testing.T) {
	f := newFixture(t)
	s := openStream(t, context.Background(), f.srv.URL+"/ui/events")
	e := s.next(t)
	if e.name != "overview" || !strings.Contains(e.data, `id="row-slots"`) || !strings.Contains(e.data, `data-level="1"`) {
		t.Fatalf("first event %q:\n%s", e.name, e.data)
	}
	if strings.Contains(e.data, "<html") {
		t.Errorf("the event carries a whole page, want the rows:\n%s", e.data)
	}
	res, err := f.c.Acquire(context.Background(), "slots")
	if err != nil || !res.Granted() {
		t.Fatalf("acquire: %v %v", res, err)
	}
	f.ticks <- t0
	e = s.next(t)
	row := rowHTML(e.data, "slots")
	if !strings.Contains(row, `data-level="0"`) || !strings.Contains(row, `<td class="num leases">2</td>`) {
		t.Errorf("after a second slot was taken, the row is:\n%s", row)
	}
}

// rowHTML returns the line of data holding dim's row.
func rowHTML(data, dim string) string {
	for line := range strings.Lines(data) {
		if strings.Contains(line, `id="row-`+dim+`"`) {
			return line
		}
	}
	return ""
}

// TestEventsShareOneRead opens ten streams and counts the store's state
// reads: one per tick, whatever the number of streams; none once they
// have all left.
func TestEventsShareOneRead(t *testing.T) {
	f := newFixture(t)
	const dashboards, ticks = 10, 5
	ctx, cancel := context.WithCancel(context.Background())
	streams := make([]*stream, dashboards)
	for i := range streams {
		streams[i] = openStream(t, ctx, f.srv.URL+"/ui/events")
	}
	before := f.st.lists.Load()
	readAll := func() {
		var wg sync.WaitGroup
		for _, s := range streams {
			wg.Go(func() { s.next(t) })
		}
		wg.Wait()
	}
	readAll() // the frame each got on joining
	for range ticks {
		f.ticks <- t0
		readAll()
	}
	if got, want := f.st.lists.Load()-before, int64(1+ticks); got > want {
		t.Errorf("%d dashboards over %d ticks made %d state reads, want at most %d", dashboards, ticks, got, want)
	}
	cancel()
	for _, s := range streams {
		for range s.ch { // until the stream ends
		}
	}
	waitFor(t, func() bool {
		f.h.hub.mu.Lock()
		defer f.h.hub.mu.Unlock()
		return len(f.h.hub.subs) == 0
	})
	n := f.st.lists.Load()
	select {
	case f.ticks <- t0: // the loop, if still waiting, stops without a read
	case <-time.After(time.Second):
	}
	waitFor(t, func() bool {
		f.h.hub.mu.Lock()
		defer f.h.hub.mu.Unlock()
		return !f.h.hub.running
	})
	if got := f.st.lists.Load(); got != n {
		t.Errorf("%d state reads after every dashboard closed, want 0", got-n)
	}
}

// TestEventsEndWithContext ends an open stream when the console's context
// ends, as at a server's shutdown.
func TestEventsEndWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFixture(t, WithContext(ctx))
	s := openStream(t, context.Background(), f.srv.URL+"/ui/events")
	s.next(t)
	cancel()
	select {
	case _, ok := <-s.ch:
		for ok {
			_, ok = <-s.ch
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream is still open 10s after the console's context ended")
	}
}

// TestSSEEvent formats multi-line data as one data field per line.
func TestSSEEvent(t *testing.T) {
	for _, tt := range []struct{ data, want string }{
		{"<tr>a</tr>\n<tr>b</tr>\n", "event: overview\ndata: <tr>a</tr>\ndata: <tr>b</tr>\n\n"},
		{"one", "event: overview\ndata: one\n\n"},
		{"", "event: overview\ndata:\n\n"},
	} {
		if got := string(sseEvent("overview", []byte(tt.data))); got != tt.want {
			t.Errorf("sseEvent(%q) = %q, want %q", tt.data, got, tt.want)
		}
	}
}

// TestRelease releases a lease from its page, for an admin only, and
// refuses a cross-origin form.
func TestRelease(t *testing.T) {
	admin := func(r *http.Request) bool { return r.Header.Get("X-Admin") == "yes" }
	f := newFixture(t, WithAdmin(admin))
	id := f.lease.ID()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(hdr map[string]string) *http.Response {
		req, _ := http.NewRequest("POST", f.srv.URL+"/ui/lease/"+id+"/release", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := post(nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("without the admin scope: %d, want 403", res.StatusCode)
	}
	if res := post(map[string]string{"X-Admin": "yes", "Sec-Fetch-Site": "cross-site"}); res.StatusCode != http.StatusForbidden {
		t.Errorf("from another site: %d, want 403", res.StatusCode)
	}
	if _, body := f.get(t, "/ui/lease/"+id); strings.Contains(body, "<form") {
		t.Errorf("the release form shows without the admin scope:\n%s", body)
	}
	ls, _ := f.c.Leases(context.Background(), sluice.LeaseQuery{})
	if len(ls) != 1 {
		t.Fatalf("refused releases changed the leases: %v", ls)
	}
	res := post(map[string]string{"X-Admin": "yes", "Sec-Fetch-Site": "same-origin"})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "../../leases?released="+id {
		t.Fatalf("release: %d Location %q, want 303 to ../../leases?released=%s", res.StatusCode, res.Header.Get("Location"), id)
	}
	if ls, _ := f.c.Leases(context.Background(), sluice.LeaseQuery{}); len(ls) != 0 {
		t.Errorf("after the release, leases %v, want none", ls)
	}
	if _, body := f.get(t, "/ui/leases?released="+id); !strings.Contains(body, "Lease "+id+" released.") {
		t.Errorf("the leases page does not confirm the release:\n%s", body)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met within 10s")
}

// TestReleaseBadID answers a lease id that is no lease id with 400.
func TestReleaseBadID(t *testing.T) {
	f := newFixture(t, WithAdmin(func(*http.Request) bool { return true }))
	res, err := http.Post(f.srv.URL+"/ui/lease/not-a-uuid/release", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("release of a bad id: %d, want 400", res.StatusCode)
	}
}

// TestEventsCapped: beyond the cap of open streams, a new one is refused
// with 503 and Retry-After; once one leaves, a new one is let in.
func TestEventsCapped(t *testing.T) {
	f := newFixture(t)
	f.h.maxStreams = 2
	ctx, cancel := context.WithCancel(context.Background())
	first := openStream(t, ctx, f.srv.URL+"/ui/events")
	first.next(t)
	second := openStream(t, context.Background(), f.srv.URL+"/ui/events")
	second.next(t)
	res, err := http.Get(f.srv.URL + "/ui/events")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a third stream: %d, Retry-After %q; want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	cancel() // the first leaves
	for range first.ch {
	}
	for i := 0; ; i++ { // its handler notices at its next frame or at once
		f.h.hub.mu.Lock()
		n := len(f.h.hub.subs)
		f.h.hub.mu.Unlock()
		if n < 2 {
			break
		}
		if i == 3000 { // 30 s: a loaded machine's scheduling, not a timing assert
			t.Fatal("the first stream's handler did not leave")
		}
		time.Sleep(10 * time.Millisecond)
	}
	third := openStream(t, context.Background(), f.srv.URL+"/ui/events")
	third.next(t)
}
