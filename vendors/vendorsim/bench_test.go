package vendorsim

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkServe measures the handler alone (no network): one chat
// completion per op, with limits large enough to admit everything.
func BenchmarkServe(b *testing.B) {
	for _, tc := range []struct {
		name, path, body string
		v                Vendor
		lim              Limits
	}{
		{"openai-chat", PathChatCompletions, chatBody(50, 200), OpenAI, Limits{RPM: 1e9, TPM: 1e11}},
		{"openai-chat-stream", PathChatCompletions, strings.Replace(chatBody(50, 200), `"model"`, `"stream":true,"stream_options":{"include_usage":true},"model"`, 1), OpenAI, Limits{RPM: 1e9, TPM: 1e11}},
		{"anthropic-messages", PathMessages, messagesBody(50, 200), Anthropic, Limits{RPM: 1e9, ITPM: 1e11, OTPM: 1e11}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := New(Config{Vendor: tc.v, Limits: tc.lim, OutputTokens: Fixed(20), StreamChunkTokens: 5})
			if err != nil {
				b.Fatal(err)
			}
			body := []byte(tc.body)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := httptest.NewRequest(http.MethodPost, tc.path, bytes.NewReader(body))
					w := httptest.NewRecorder()
					s.ServeHTTP(w, r)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d: %s", w.Code, w.Body.String())
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// BenchmarkServeHTTP measures requests over loopback HTTP with keep-alive,
// client and server on this machine.
func BenchmarkServeHTTP(b *testing.B) {
	s, err := New(Config{Vendor: OpenAI, Limits: Limits{RPM: 1e9, TPM: 1e11}, OutputTokens: Fixed(20)})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	body := []byte(chatBody(50, 200))
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		var buf bytes.Buffer
		for pb.Next() {
			resp, err := c.Post(srv.URL+PathChatCompletions, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			buf.Reset()
			_, _ = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
