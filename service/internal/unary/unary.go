// Package unary writes the responses of unary RPCs whole.
//
// connect-go flushes a response as soon as its message is written, so
// that a streaming client sees each message at once. A unary call has one
// message, followed by the trailers when the handler returns: the flush
// costs a write (a system call, an HTTP/2 frame flush) that carries half
// the response. Without it, the HTTP server sends the headers, the
// message and the trailers together when the handler returns, and
// HTTP/2 coalesces the frames of concurrent calls into fewer writes.
package unary

import "net/http"

// Handler returns h with the flushes of its unary procedures ignored:
// every request whose path is not in streaming. A streaming procedure
// keeps its flushes (connect-go refuses to serve a stream without them).
func Handler(h http.Handler, streaming ...string) http.Handler {
	stream := make(map[string]bool, len(streaming))
	for _, p := range streaming {
		stream[p] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stream[r.URL.Path] {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(writer{w}, r)
	})
}

// writer is a ResponseWriter without http.Flusher. It has no Unwrap
// either, so that http.ResponseController cannot reach the flush.
type writer struct{ w http.ResponseWriter }

func (u writer) Header() http.Header         { return u.w.Header() }
func (u writer) Write(p []byte) (int, error) { return u.w.Write(p) }
func (u writer) WriteHeader(code int)        { u.w.WriteHeader(code) }
