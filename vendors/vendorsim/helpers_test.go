package vendorsim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// epoch is a calendar-minute boundary, so fixed windows start with it.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newSim(t testing.TB, cfg Config) (*Sim, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: epoch}
	cfg.Clock = clk
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, clk
}

// post sends body to path with header pairs and returns the recorded
// response.
func post(t testing.TB, s *Sim, path, body string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// chatBody returns a chat request whose prompt is tokens×4 bytes.
func chatBody(tokens, maxTokens int) string {
	m := map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": strings.Repeat("abcd", tokens)}}}
	if maxTokens > 0 {
		m["max_tokens"] = maxTokens
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// messagesBody returns an Anthropic request whose prompt is tokens×4 bytes.
func messagesBody(tokens, maxTokens int) string {
	b, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": maxTokens,
		"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("abcd", tokens)}}})
	return string(b)
}

func wantStatus(t testing.TB, w *httptest.ResponseRecorder, want int) {
	t.Helper()
	if w.Code != want {
		t.Fatalf("status = %d, want %d; body %s", w.Code, want, w.Body.String())
	}
}

func wantHeader(t testing.TB, w *httptest.ResponseRecorder, name, want string) {
	t.Helper()
	if got := w.Header().Get(name); got != want {
		t.Errorf("%s = %q, want %q", name, got, want)
	}
}

func metricStats(t testing.TB, s *Sim, m Metric) MetricStats {
	t.Helper()
	ms, ok := s.Stats().Metric(m)
	if !ok {
		t.Fatalf("metric %s not enforced", m)
	}
	return ms
}
