package transport

import (
	"compress/gzip"
	"compress/zlib"
	"io"
	"mime"
	"strings"
)

// An inflater decodes a compressed response body for the usage tracker
// as the caller reads it. A response reaches the caller still compressed
// when the caller (or its SDK) asked for the encoding itself; its usage
// is read from the decoded bytes, the caller's copy left as it is. The
// compressed bytes go through a pipe to a goroutine that decodes them and
// hands them to sink; a body that cannot be decoded is drained, and its
// usage is then unknown (settled as a partial call).
type inflater struct {
	pw   *io.PipeWriter
	done chan struct{}
}

// newInflater returns an inflater for the Content-Encoding enc, or nil
// when the body is not compressed or its encoding is not one this
// package decodes (gzip and deflate are).
func newInflater(enc string, sink func([]byte)) *inflater {
	enc = strings.ToLower(strings.TrimSpace(enc))
	var open func(io.Reader) (io.Reader, error)
	switch enc {
	case "gzip", "x-gzip":
		open = func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }
	case "deflate":
		open = func(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }
	default:
		return nil
	}
	pr, pw := io.Pipe()
	f := &inflater{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer func() { _, _ = io.Copy(io.Discard, pr) }() // never leave a write blocked
		r, err := open(pr)
		if err != nil {
			return
		}
		buf := make([]byte, 16<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				sink(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return f
}

// write passes on the next compressed bytes; it returns once they are
// decoded.
func (f *inflater) write(p []byte) { _, _ = f.pw.Write(p) }

// close ends the input and waits until what was written is decoded.
func (f *inflater) close() {
	_ = f.pw.Close()
	<-f.done
}

// isJSON reports a JSON content type.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
