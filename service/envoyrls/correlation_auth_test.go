package envoyrls_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ontopix/sluice/service/auth"
	"github.com/ontopix/sluice/service/envoyrls"
	"github.com/ontopix/sluice/store/memstore"
)

// A request's correlation entry belongs to the principal whose call
// opened it: principal "gateway" (acquire on openai#*) holds a stream's
// concurrent slot under request id r-1, and principal "other", allowed on
// other#* only, sending an end-of-stream call with r-1 (and no descriptor
// on any dimension) ends nothing of it; the gateway's own end call does.
func TestCorrelationBelongsToItsPrincipal(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	a, err := auth.Parse("auth.yaml", []byte(fmt.Sprintf(`principals:
  - name: gateway
    token_sha256: %s
    verbs: [acquire]
    dimensions: ["openai#*"]
  - name: other
    token_sha256: %s
    verbs: [acquire]
    dimensions: ["other#*"]
`, sum("slc_gw"), sum("slc_other"))))
	if err != nil {
		t.Fatal(err)
	}
	c, s := directServer(t, memstore.New(), buckets)
	path, h := s.Handler()
	mux := http.NewServeMux()
	mux.Handle(path, a.Middleware(h))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)

	call := func(token, body string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, hs.URL+envoyrls.Procedure, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("HTTP %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	slots := func() int64 {
		st, err := c.GetBucket(context.Background(), "openai#concurrent")
		if err != nil {
			t.Fatal(err)
		}
		return int64(st.Tokens) / 1000
	}

	// The gateway's first call: one of the 2 stream slots, held until its end call.
	first := call("slc_gw", `{"domain":"llm","descriptors":[{"entries":[{"key":"generic_key","value":"streams"},{"key":"request_id","value":"r-1"}]}]}`)
	if !strings.Contains(first, `"OK"`) {
		t.Fatalf("gateway's first call: %s", first)
	}
	if got := slots(); got != 1 {
		t.Fatalf("free slots while the gateway's stream runs: got %d, want 1", got)
	}
	// The other principal cannot touch openai#* ...
	if got := call("slc_other", `{"domain":"llm","descriptors":[{"entries":[{"key":"generic_key","value":"streams"},{"key":"request_id","value":"x"}]}]}`); !strings.Contains(got, "permission_denied") {
		t.Fatalf("other on openai#concurrent: got %s, want permission_denied", got)
	}
	// ... nor end the gateway's request by sending its request id.
	call("slc_other", `{"domain":"llm","descriptors":[{"entries":[{"key":"generic_key","value":"unmapped"},{"key":"request_id","value":"r-1"}]}]}`)
	if got := slots(); got != 1 {
		t.Errorf("free slots after another principal sent the gateway's request id: got %d, want 1 (the gateway's lease was released by a principal without rights on openai#concurrent)", got)
	}
	call("slc_gw", `{"domain":"llm","descriptors":[{"entries":[{"key":"generic_key","value":"streams"},{"key":"request_id","value":"r-1"}]}]}`)
	if got := slots(); got != 2 {
		t.Errorf("free slots after the gateway's end call: got %d, want 2", got)
	}
}
