package console

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"testing"
)

func TestAcceptsGzip(t *testing.T) {
	tests := []struct {
		header string
		want   bool
	}{
		{"", false},
		{"gzip", true},
		{"gzip, deflate, br, zstd", true},
		{"br;q=1.0, GZIP;q=0.5", true},
		{"x-gzip", true},
		{"*", true},
		{"gzip;q=0", false},
		{"gzip; q=0.0, identity", false},
		{"deflate, br", false},
		{"identity", false},
		{"*;q=0", false},
		{"gzip;q=0, *", false},
		{"*;q=0, gzip", true},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest("GET", "/", nil)
		if tt.header != "" {
			r.Header.Set("Accept-Encoding", tt.header)
		}
		if got := acceptsGzip(r); got != tt.want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
}

// get fetches url with Accept-Encoding set as given (so that the Go client
// does not decompress on its own) and returns the response and its body
// as sent.
func get(t *testing.T, url, encoding string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept-Encoding", encoding)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPagesGzipped: a page is sent gzipped to a client that accepts it,
// and decompresses to what a client that does not gets.
func TestPagesGzipped(t *testing.T) {
	f := newFixture(t)
	url := f.srv.URL + "/ui/"
	plainRes, plain := get(t, url, "identity")
	gzRes, gz := get(t, url, "gzip, deflate, br")
	if enc := plainRes.Header.Get("Content-Encoding"); enc != "" {
		t.Errorf("identity: Content-Encoding %q", enc)
	}
	if enc := gzRes.Header.Get("Content-Encoding"); enc != "gzip" {
		t.Fatalf("gzip accepted: Content-Encoding %q, want gzip", enc)
	}
	for _, res := range []*http.Response{plainRes, gzRes} {
		if v := res.Header.Get("Vary"); !strings.Contains(v, "Accept-Encoding") {
			t.Errorf("Vary %q, want Accept-Encoding", v)
		}
	}
	if got := gunzip(t, gz); !bytes.Equal(got, plain) {
		t.Errorf("the gzipped page decompresses to %d bytes, the plain page has %d", len(got), len(plain))
	}
	if len(gz) >= len(plain) {
		t.Errorf("gzipped %d bytes, plain %d", len(gz), len(plain))
	}
	if !bytes.HasPrefix(plain, []byte("<!doctype html>")) {
		t.Errorf("the plain page starts %q", plain[:min(len(plain), 20)])
	}
}

// TestAssetsGzipped: an asset is sent gzipped to a client that accepts
// it, with its own entity tag, and decompresses to the embedded file; a
// client that refuses gzip gets the file itself.
func TestAssetsGzipped(t *testing.T) {
	f := newFixture(t)
	url := f.srv.URL + "/ui/assets/vendor/htmx.min.js"
	want, err := fs.ReadFile(files, "assets/vendor/htmx.min.js")
	if err != nil {
		t.Fatal(err)
	}
	res, gz := get(t, url, "gzip")
	if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != "gzip" || !strings.HasSuffix(res.Header.Get("ETag"), `-gz"`) {
		t.Fatalf("gzip: %d, Content-Encoding %q, ETag %q", res.StatusCode, res.Header.Get("Content-Encoding"), res.Header.Get("ETag"))
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("Content-Type %q", ct)
	}
	if got := gunzip(t, gz); !bytes.Equal(got, want) {
		t.Errorf("decompresses to %d bytes, the file has %d", len(got), len(want))
	}
	if res304, _ := get(t, url, "gzip", "If-None-Match", res.Header.Get("ETag")); res304.StatusCode != http.StatusNotModified {
		t.Errorf("revalidating the gzipped file: %d, want 304", res304.StatusCode)
	}
	plainRes, plain := get(t, url, "gzip;q=0")
	if plainRes.Header.Get("Content-Encoding") != "" || !bytes.Equal(plain, want) || plainRes.Header.Get("ETag") == res.Header.Get("ETag") {
		t.Errorf("gzip refused: Content-Encoding %q, %d bytes (want %d), ETag %q", plainRes.Header.Get("Content-Encoding"), len(plain), len(want), plainRes.Header.Get("ETag"))
	}
	if res, _ := get(t, f.srv.URL+"/ui/assets/nothing.js", "gzip"); res.StatusCode != http.StatusNotFound {
		t.Errorf("a missing asset: %d, want 404", res.StatusCode)
	}
}
