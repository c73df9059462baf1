package vendorsim

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// exchange is one admitted request being answered.
type exchange struct {
	s         *Sim
	c         *call
	g         *grant
	ctl       control
	rng       *rand.Rand
	seq       uint64
	created   time.Time
	out       int64 // output tokens to produce
	truncated bool  // out reached the request's max tokens
	produced  int64
	finished  bool
}

// run draws the response, writes it in the API's format and settles.
func (x *exchange) run(ctx context.Context, w http.ResponseWriter) {
	x.draw()
	defer x.finish()
	switch x.c.api {
	case apiChat:
		x.chat(ctx, w)
	case apiResponses:
		x.responses(ctx, w)
	case apiEmbeddings:
		x.embeddings(ctx, w)
	case apiMessages:
		x.messages(ctx, w)
	}
}

// draw picks the number of output tokens.
func (x *exchange) draw() {
	if x.c.api == apiEmbeddings {
		return
	}
	bound := x.c.maxTokens
	if bound == 0 {
		bound = x.s.cfg.DefaultMaxTokens
	}
	n := x.ctl.output
	if n < 0 {
		n = max(1, int64(math.Round(x.s.cfg.OutputTokens.sample(x.rng))))
	}
	if n >= bound {
		n, x.truncated = bound, true
	}
	x.out = n
}

// produce generates the output: it waits the time to first token, then
// per chunk the per-token time of its tokens, and hands each chunk's text
// to emit. In a stream each chunk is debited as produced; a JSON response
// is one chunk, debited when it completes. It returns false if the client
// went away.
func (x *exchange) produce(ctx context.Context, stream bool, emit func(text string) error) bool {
	cfg := &x.s.cfg
	if !sleep(ctx, seconds(cfg.TimeToFirstToken.sample(x.rng))) {
		return false
	}
	chunk := x.out
	if stream {
		chunk = cfg.StreamChunkTokens
	}
	perToken := !cfg.PerOutputToken.zero()
	for x.produced < x.out {
		k := min(chunk, x.out-x.produced)
		var d time.Duration
		for i := range k {
			if perToken && x.produced+i > 0 {
				d += seconds(cfg.PerOutputToken.sample(x.rng))
			}
		}
		if !sleep(ctx, d) {
			return false
		}
		if stream {
			x.s.produced(x.g, k)
		}
		text := filler(x.produced, k)
		x.produced += k
		if err := emit(text); err != nil {
			return false
		}
	}
	return true
}

// finish debits the output not yet debited and settles the request. The
// writers call it before the response's last bytes, so that a client that
// has read the whole response sees it settled; run calls it again (a no-op)
// for a client that went away.
func (x *exchange) finish() {
	if x.finished {
		return
	}
	x.finished = true
	s := x.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if rest := x.produced - x.g.output; rest > 0 {
		s.lim.produce(now, x.g, rest)
	}
	s.lim.settle(now, x.g)
	s.st.inFlight--
	s.st.outputTokens += x.produced
	s.st.inputTokens += x.c.input
	s.st.sample(s, now)
}

// produced debits n streamed output tokens.
func (s *Sim) produced(g *grant, n int64) {
	s.mu.Lock()
	now := s.clock.Now()
	s.lim.produce(now, g, n)
	s.st.sample(s, now)
	s.mu.Unlock()
}

// fillerWords are 4-byte words: the filler has exactly 4 bytes per token.
var fillerWords = strings.Fields("the sim was fed ten new bits and got one odd map for its old log; via any few raw but all hot dry")

// filler returns tokens [from, from+n) of the output text.
func filler(from, n int64) string {
	var b strings.Builder
	b.Grow(int(n) * 4)
	for i := from; i < from+n; i++ {
		w := fillerWords[i%int64(len(fillerWords))]
		b.WriteString(w)
		b.WriteString("    "[:4-len(w)])
	}
	return b.String()
}

// injectModel sets "model" in a JSON object body that has none.
func injectModel(body []byte, model string) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return body
	}
	if v, ok := m["model"]; ok && string(v) != `""` && string(v) != "null" {
		return body
	}
	m["model"], _ = json.Marshal(model)
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// sse writes server-sent events, flushing each.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

// event writes one event; name "" writes a data-only event.
func (s *sse) event(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.raw(name, data)
}

func (s *sse) raw(name string, data []byte) error {
	buf := make([]byte, 0, len(data)+len(name)+16)
	if name != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, name...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil && err != http.ErrNotSupported {
		return err
	}
	return nil
}

// writeJSON writes a JSON response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}
