package transport_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
)

// sentBodies records the bodies that reach the vendor and answers each
// with an empty event stream.
type sentBodies struct {
	mu     sync.Mutex
	bodies []string
}

func (s *sentBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(req.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(b))
	s.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(strings.NewReader("data: [DONE]\n\n")), Request: req}, nil
}

// TestUsageInjection checks what a streamed chat completion asks the
// vendor for: usage is added when the request leaves it out, never when
// the caller turned it off, and never for an Azure API version that
// refuses stream_options (a 400 for every streamed call).
func TestUsageInjection(t *testing.T) {
	tests := []struct {
		name, url, body string
		want            string // what stream_options must read in the body sent
	}{
		{"added", "https://api.openai.com/v1/chat/completions",
			`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`, `"include_usage":true`},
		{"caller turned it off", "https://api.openai.com/v1/chat/completions",
			`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}`, `"include_usage":false`},
		{"azure, a version with stream_options", "https://x.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
			`{"stream":true,"messages":[{"role":"user","content":"hi"}]}`, `"include_usage":true`},
		{"azure, a version without stream_options", "https://x.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-06-01",
			`{"stream":true,"messages":[{"role":"user","content":"hi"}]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := sluice.New(memstore.New())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			oa, err := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 600, TPM: 100_000})
			if err != nil {
				t.Fatal(err)
			}
			az, err := vendors.AzureProfile(vendors.AzureLimits{Deployment: "gpt-4o", TPM: 60_000})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range append(oa.Buckets(), az.Buckets()...) {
				if err := c.PutBucket(context.Background(), b); err != nil {
					t.Fatal(err)
				}
			}
			sent := &sentBodies{}
			tr, err := transport.New(c, []vendors.Profile{oa, az}, transport.WithBase(sent))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: tr}).Post(tt.url, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if len(sent.bodies) != 1 {
				t.Fatalf("%d requests sent, want 1", len(sent.bodies))
			}
			got := sent.bodies[0]
			if tt.want == "" && strings.Contains(got, "stream_options") || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("body sent: %s\nwant stream_options %q", got, tt.want)
			}
		})
	}
}
