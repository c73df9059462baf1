package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Pages and assets are sent gzipped to a browser that accepts it (every
// browser does): the leases page of a busy fleet is hundreds of
// kilobytes of HTML, a tenth of that gzipped, which an operator on a slow
// link notices. The event stream is not compressed: its fragments are
// small and must leave at once.

// minGzip is the smallest body worth compressing, in bytes.
const minGzip = 1024

// acceptsGzip reports whether r's Accept-Encoding allows gzip (RFC 9110:
// "gzip" without q=0, else "*" without q=0; gzip;q=0 refuses it even with
// "*").
func acceptsGzip(r *http.Request) bool {
	gz, star := 0, 0 // 0: not named, 1: allowed, -1: refused
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "gzip" && name != "x-gzip" && name != "*" {
				continue
			}
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
						q = f
					}
				}
			}
			verdict := -1
			if q > 0 {
				verdict = 1
			}
			if name == "*" {
				star = verdict
			} else {
				gz = verdict
			}
		}
	}
	if gz != 0 {
		return gz > 0
	}
	return star > 0
}

// gzipPool holds gzip writers between responses (a writer's state is
// hundreds of kilobytes).
type gzipPool struct{ p sync.Pool }

func (g *gzipPool) get(w *bytes.Buffer) *gzip.Writer {
	if z, ok := g.p.Get().(*gzip.Writer); ok {
		z.Reset(w)
		return z
	}
	z, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // the level is valid
	return z
}

func (g *gzipPool) put(z *gzip.Writer) { g.p.Put(z) }

// writeBody writes a rendered body with status, gzipped when r accepts
// it and it is large enough to gain. The caller has set Content-Type.
func (h *handler) writeBody(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	w.Header().Add("Vary", "Accept-Encoding")
	if len(body) >= minGzip && acceptsGzip(r) {
		var b bytes.Buffer
		z := h.gz.get(&b)
		_, _ = z.Write(body) // a bytes.Buffer never fails
		_ = z.Close()
		h.gz.put(z)
		body = b.Bytes()
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// asset is an embedded file as served: its bytes and entity tag, plain
// and gzipped.
type asset struct {
	name           string
	plain, gzipped []byte
	tag, gzTag     string
}

// assets are the embedded files under assets/, by path below it, each
// gzipped once when the package is loaded.
var assets = func() map[string]*asset {
	out := map[string]*asset{}
	err := fs.WalkDir(files, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, path)
		if err != nil {
			return err
		}
		var gz bytes.Buffer
		z, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression) // the level is valid
		_, _ = z.Write(b)
		_ = z.Close()
		sum := sha256.Sum256(b)
		tag := base64.RawURLEncoding.EncodeToString(sum[:12])
		out[strings.TrimPrefix(path, "assets/")] = &asset{name: d.Name(), plain: b, gzipped: gz.Bytes(),
			tag: `"` + tag + `"`, gzTag: `"` + tag + `-gz"`}
		return nil
	})
	if err != nil {
		panic(err) // the embedded tree is readable
	}
	return out
}()

// serveAsset serves an embedded file, gzipped when r accepts it, with an
// entity tag per representation so that a browser revalidates it with a
// 304 once its hour of max-age is over.
func serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := assets[strings.TrimPrefix(r.URL.Path, "/assets/")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Header().Add("Vary", "Accept-Encoding")
	body, tag := a.plain, a.tag
	if acceptsGzip(r) && len(a.gzipped) < len(a.plain) {
		body, tag = a.gzipped, a.gzTag
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Header().Set("ETag", tag)
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(body))
}
