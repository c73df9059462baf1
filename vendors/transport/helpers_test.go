package transport_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// simHost is the host the tests' requests name; the pipe transport serves
// them from a simulator in-process.
const simHost = "sim.test"

// pipeRT serves requests from a handler in-process, streaming the response
// through a pipe: no sockets, so it runs inside testing/synctest bubbles.
type pipeRT struct{ h http.Handler }

type pipeWriter struct {
	header http.Header
	status int
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	sent   http.Header
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

func (w *pipeWriter) Flush() {}

func (p pipeRT) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	sreq := req.Clone(req.Context())
	sreq.Body = io.NopCloser(bytesReader(body))
	sreq.RequestURI = req.URL.RequestURI()
	go func() {
		p.h.ServeHTTP(w, sreq)
		w.WriteHeader(http.StatusOK)
		if err := req.Context().Err(); err != nil {
			pw.CloseWithError(context.Cause(req.Context()))
			return
		}
		pw.Close()
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pr.Close()
		return nil, context.Cause(req.Context())
	}
	return &http.Response{StatusCode: w.status, Status: http.StatusText(w.status), Header: w.sent, Body: pr,
		Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: -1}, nil
}

// env is a simulator, a Client on a memory store and a Transport routing
// simHost to the simulator's vendor.
type env struct {
	sim     *vendorsim.Sim
	client  *sluice.Client
	tr      *transport.Transport
	profile vendors.Profile
	mu      sync.Mutex
	events  []transport.Event
	acq     int                // acquisition attempts (the Client's observer)
	waits   []sluice.WaitEvent // the Client's waits
}

// newEnv builds an env; call it inside the synctest bubble when the test
// uses one. The simulator, the Client and the Transport share the
// runtime clock (virtual inside a bubble).
func newEnv(t testing.TB, sim vendorsim.Config, p vendors.Profile, opts ...transport.Option) *env {
	return newEnvClock(t, sim, p, frozen, opts...)
}

// frozen is a Client clock that never moves: balances never refill, so a
// test can assert them exactly (capacity less what was settled).
var frozen sluice.Clock = sluice.ClockFunc(func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) })

// newEnvClock is newEnv with the Client's clock; nil is the runtime's
// (virtual inside a synctest bubble).
func newEnvClock(t testing.TB, sim vendorsim.Config, p vendors.Profile, clock sluice.Clock, opts ...transport.Option) *env {
	t.Helper()
	return newEnvObserved(t, sim, p, clock, nil, opts...)
}

// newEnvObserved is newEnvClock with another observer on the Client (nil
// for none).
func newEnvObserved(t testing.TB, sim vendorsim.Config, p vendors.Profile, clock sluice.Clock, extra *sluice.Observer, opts ...transport.Option) *env {
	t.Helper()
	s, err := vendorsim.New(sim)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{sim: s, profile: p}
	obs := &sluice.Observer{
		Acquired: func(context.Context, sluice.AcquireEvent) { e.mu.Lock(); e.acq++; e.mu.Unlock() },
		Waited: func(_ context.Context, ev sluice.WaitEvent) {
			e.mu.Lock()
			e.waits = append(e.waits, ev)
			e.mu.Unlock()
		},
	}
	copts := []sluice.Option{sluice.WithObserver(sluice.Observers(obs, extra))}
	if clock != nil {
		copts = append(copts, sluice.WithClock(clock))
	}
	c, err := sluice.New(memstore.New(), copts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Buckets() {
		if err := c.PutBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	e.client = c
	base := []transport.Option{
		transport.WithBase(pipeRT{s}),
		transport.WithRoute(transport.Route{Host: simHost, Vendor: p.Vendor}),
		transport.WithEvents(func(_ context.Context, ev transport.Event) {
			e.mu.Lock()
			e.events = append(e.events, ev)
			e.mu.Unlock()
		}),
	}
	e.tr, err = transport.New(c, []vendors.Profile{p}, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) httpClient() *http.Client { return &http.Client{Transport: e.tr} }

func (e *env) eventList() []transport.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]transport.Event(nil), e.events...)
}

func (e *env) waitList() []sluice.WaitEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]sluice.WaitEvent(nil), e.waits...)
}

func (e *env) acquisitions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.acq
}

// balances returns every dimension's balance in whole tokens (rounded
// down), by name.
func (e *env) balances(t testing.TB) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, d := range e.profile.Dimensions {
		st, err := e.client.GetBucket(context.Background(), d.Name)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Name] = int64(st.Tokens) / 1000
	}
	return out
}

// openAIProfile returns an OpenAI profile whose tokens are read as
// adjusted to usage, so that a test sees the reported usage settled; the
// default reading, which keeps the admission charge, has its own tests
// (reading_test.go).
func openAIProfile(t testing.TB, l vendors.OpenAILimits) vendors.Profile {
	t.Helper()
	p, err := vendors.OpenAIProfile(l, vendors.WithCostReading(vendors.AdjustedToUsage))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func anthropicProfile(t testing.TB, l vendors.AnthropicLimits) vendors.Profile {
	t.Helper()
	p, err := vendors.AnthropicProfile(l)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func bytesReader(b []byte) io.Reader { return &byteReader{b: b} }

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// runWorkers runs n workers, each calling call back to back until ctx
// ends; a worker whose call fails backs off a second, as a caller would
// (which also keeps a bubble's virtual time moving).
func runWorkers(ctx context.Context, n int, call func(context.Context) error) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := call(ctx); err != nil && ctx.Err() == nil {
					time.Sleep(time.Second)
				}
			}
		}()
	}
	wg.Wait()
}
