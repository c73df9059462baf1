package service_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ontopix/sluice"
)

// TestCompressOnlyLargeAnswers asks with Accept-Encoding: gzip, as the
// Connect clients do: an answer of a few dozen bytes goes out as it is
// (compressing it costs more CPU than the whole call), a large one
// compressed.
func TestCompressOnlyLargeAnswers(t *testing.T) {
	buckets := append([]sluice.Bucket(nil), limits...)
	for i := range 40 {
		buckets = append(buckets, sluice.Bucket{Name: fmt.Sprintf("many#d%02d", i), Config: sluice.PerMinute(sluice.Tokens, 1000)})
	}
	s := serve(t, "memory", buckets)
	tests := []struct {
		method, body string
		wantEncoding string
	}{
		{"Acquire", `{"items": [{"dimension": "v#rpm", "cost": 1}]}`, ""},
		{"Peek", `{}`, "gzip"},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, s.http.URL+"/sluice.v1.LimiterService/"+tt.method, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := s.http.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			n, _ := io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Encoding"); got != tt.wantEncoding {
				t.Errorf("Content-Encoding of a %d-byte answer: got %q, want %q", n, got, tt.wantEncoding)
			}
		})
	}
}
