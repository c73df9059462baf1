package console

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"time"
)

// hub refreshes the overview for the open event streams: while at least
// one is open, it reads the state once per interval, renders the rows
// once, and hands the same frame to every stream. A stream that falls
// behind gets the newest frame, never a backlog.
type hub struct {
	h  *handler
	mu sync.Mutex
	// subs are the open streams' mailboxes, each of capacity 1.
	subs map[chan []byte]struct{}
	// running reports that the refresh loop runs; it stops when the last
	// stream leaves.
	running bool
	// last is the newest frame, given at once to a stream that joins.
	last []byte
}

func newHub(h *handler) *hub { return &hub{h: h, subs: map[chan []byte]struct{}{}} }

// maxStreams bounds the open event streams: each holds a connection and
// a goroutine, and costs a write per refresh.
const maxStreams = 256

// streamWriteTimeout bounds one frame's write: a client that stops
// reading is dropped, rather than holding its goroutine for ever.
const streamWriteTimeout = 10 * time.Second

// join opens a mailbox, starting the refresh loop if it is the first; nil
// when max streams are open already.
func (b *hub) join(max int) chan []byte {
	ch := make(chan []byte, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs) >= max {
		return nil
	}
	b.subs[ch] = struct{}{}
	if b.last != nil {
		ch <- b.last
	}
	if !b.running {
		b.running = true
		go b.loop()
	}
	return ch
}

// leave closes a mailbox.
func (b *hub) leave(ch chan []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subs, ch)
}

// loop refreshes at once, then every interval, until no stream is open or
// the console's context ends.
func (b *hub) loop() {
	tick, stop := b.h.newTicker(b.h.interval)
	defer stop()
	for {
		if !b.busy() {
			return
		}
		frame := b.h.frame(b.h.ctx)
		b.mu.Lock()
		b.last = frame
		for ch := range b.subs {
			select {
			case <-ch: // drop the frame it has not taken yet
			default:
			}
			ch <- frame
		}
		b.mu.Unlock()
		select {
		case <-tick:
		case <-b.h.ctx.Done():
		}
	}
}

// busy reports whether a stream is open; when none is, it marks the loop
// stopped, so that the next join starts another.
func (b *hub) busy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs) == 0 || b.h.ctx.Err() != nil {
		b.running, b.last = false, nil
		return false
	}
	return true
}

// frame reads the state and renders the overview's rows as one
// server-sent event named "overview".
func (h *handler) frame(ctx context.Context) []byte {
	d := h.snapshot(ctx)
	var html bytes.Buffer
	if err := h.rows.ExecuteTemplate(&html, "rows", d); err != nil {
		h.log.Warn("console.render_failed", "error", err.Error())
	}
	return sseEvent("overview", html.Bytes())
}

// sseEvent formats one server-sent event: every line of data gets its
// own "data:" field.
func sseEvent(name string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString("event: " + name + "\n")
	for line := range bytes.Lines(data) {
		b.WriteString("data: ")
		b.Write(bytes.TrimRight(line, "\r\n"))
		b.WriteByte('\n')
	}
	if len(data) == 0 {
		b.WriteString("data:\n")
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// events streams the overview's rows as server-sent events, one frame
// per interval, until the client leaves or the console's context ends.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	ch := h.hub.join(h.maxStreams)
	if ch == nil {
		w.Header().Set("Retry-After", "10")
		http.Error(w, "too many open live views; try again later", http.StatusServiceUnavailable)
		return
	}
	defer h.hub.leave(ch)
	rc := http.NewResponseController(w)
	// A stream outlives a server's WriteTimeout; each write has its own.
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	// The client reconnects after a dropped stream; tell it how soon.
	if !write([]byte("retry: 2000\n\n")) {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.ctx.Done():
			return
		case f := <-ch:
			if !write(f) {
				return
			}
		}
	}
}
