package transport_test

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/redisstore"
	"github.com/ontopix/sluice/store/storeurl"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
)

// cannedRT answers every request at once, without I/O: a chat completion
// with its usage and OpenAI's rate-limit headers, or a chat stream of
// streamBytes bytes.
type cannedRT struct{ streamBytes int }

var chatJSON = []byte(`{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hello there, how are you today?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":8,"total_tokens":17}}`)

func (c cannedRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "100000000")
	h.Set("x-ratelimit-remaining-requests", "99999999")
	h.Set("x-ratelimit-limit-tokens", "10000000000")
	h.Set("x-ratelimit-remaining-tokens", "9999999999")
	var body io.ReadCloser
	if c.streamBytes > 0 {
		h.Set("Content-Type", "text/event-stream")
		body = &sseBody{left: c.streamBytes}
	} else {
		h.Set("Content-Type", "application/json")
		body = io.NopCloser(bytes.NewReader(chatJSON))
	}
	return &http.Response{StatusCode: 200, Header: h, Body: body, Request: req}, nil
}

// sseBody yields chat chunks until left bytes were produced, then the
// usage chunk and [DONE], without allocating per event.
type sseBody struct {
	left int
	cur  []byte
	tail bool
}

var (
	chunkEvent = []byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"the sim was fed ten new bits \"}}]}\n\n")
	usageEvent = []byte("data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":40000,\"total_tokens\":40009}}\n\ndata: [DONE]\n\n")
)

func (s *sseBody) Read(p []byte) (int, error) {
	if len(s.cur) == 0 {
		switch {
		case s.left > 0:
			s.cur = chunkEvent
			s.left -= len(chunkEvent)
		case !s.tail:
			s.cur, s.tail = usageEvent, true
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

func (s *sseBody) Close() error { return nil }

// benchTransport returns a metered transport over base on st, with limits
// no benchmark reaches.
func benchTransport(tb testing.TB, st store.Store, base http.RoundTripper) http.RoundTripper {
	tb.Helper()
	p := openAIProfile(tb, vendors.OpenAILimits{Model: "gpt-4o", RPM: 100_000_000, TPM: 10_000_000_000})
	c, err := sluice.New(st)
	if err != nil {
		tb.Fatal(err)
	}
	for _, b := range p.Buckets() {
		if err := c.PutBucket(context.Background(), b, sluice.ResetTokens()); err != nil {
			tb.Fatal(err)
		}
	}
	t, err := transport.New(c, []vendors.Profile{p}, transport.WithBase(base))
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

var chatRequest = []byte(`{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Say hello in five words, please."}]}`)

// roundTrip sends one chat request through rt and reads the response.
func roundTrip(tb testing.TB, rt http.RoundTripper, body []byte) {
	req, err := http.NewRequest(http.MethodPost, "https://api.openai.com/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// benchCalls measures whole calls and reports their p50 and p99.
func benchCalls(b *testing.B, rt http.RoundTripper) {
	b.ReportAllocs()
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		roundTrip(b, rt, chatRequest)
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
}

// BenchmarkCall is the time and memory the transport adds to a chat call
// whose vendor answers at once: bare is the base transport alone.
func BenchmarkCall(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchCalls(b, cannedRT{}) })
	b.Run("memory", func(b *testing.B) { benchCalls(b, benchTransport(b, memstore.New(), cannedRT{})) })
	b.Run("redis", func(b *testing.B) {
		srv := redistest.New(b)
		st, err := storeurl.Openers{redisstore.URLOpener()}.Open(context.Background(), "redis://"+srv.Addr+"/0")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		benchCalls(b, benchTransport(b, st, cannedRT{}))
	})
}

// BenchmarkEstimate is the estimate of the benchmark's chat request alone.
func BenchmarkEstimate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := transport.EstimateFor(vendors.OpenAI, "/v1/chat/completions", chatRequest); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream1MB reads a 1 MB chat stream, bare and metered: the
// difference in B/op is the memory the transport adds.
func BenchmarkStream1MB(b *testing.B) {
	body := []byte(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"go on"}]}`)
	for _, metered := range []bool{false, true} {
		name := "bare"
		var rt http.RoundTripper = cannedRT{streamBytes: 1 << 20}
		if metered {
			name, rt = "metered", benchTransport(b, memstore.New(), rt)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(1 << 20)
			for b.Loop() {
				roundTrip(b, rt, body)
			}
		})
	}
}

// allocated returns the bytes one call of f allocates: the least of runs
// calls, each measured alone. What else the process does only ever adds to
// a count (other goroutines' allocations; under the race detector,
// sync.Pool drops a random share of what is put back, so a call may
// allocate anew what a pool would have kept), so the least is the call's
// own.
func allocated(runs int, f func()) uint64 {
	f() // warm up: encodings, pools
	least := uint64(math.MaxUint64)
	for range runs {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// The transport adds at most 64 KiB to a streamed response, and nothing
// that grows with the stream: a 4 MB stream costs what a 1 MB one does.
func TestStreamMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation measurement")
	}
	body := []byte(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"go on"}]}`)
	extra := map[int]uint64{}
	for _, size := range []int{1 << 20, 4 << 20} {
		bare := cannedRT{streamBytes: size}
		metered := benchTransport(t, memstore.New(), bare)
		b := allocated(24, func() { roundTrip(t, bare, body) })
		m := allocated(24, func() { roundTrip(t, metered, body) })
		extra[size] = m - min(m, b)
		t.Logf("%d MB stream: bare %d B, metered %d B, extra %d B", size>>20, b, m, extra[size])
		if extra[size] > 64<<10 {
			t.Errorf("%d-byte stream: the transport added %d bytes, want at most 64 KiB", size, extra[size])
		}
	}
	if d := int64(extra[4<<20]) - int64(extra[1<<20]); d > 4<<10 {
		t.Errorf("a 4 MB stream cost %d bytes more than a 1 MB one: the overhead grows with the stream", d)
	}
}
