package envoyrls_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ontopix/sluice/service/envoyrls"
)

// TestSmallAnswersUncompressed asks with Accept-Encoding: gzip, as Connect
// clients do: a decision's answer goes out uncompressed, since compressing
// a few dozen bytes costs more CPU than the whole decision.
func TestSmallAnswersUncompressed(t *testing.T) {
	r := newRig(t, "memory")
	body := `{"domain": "llm", "descriptors": [{"entries": [{"key": "generic_key", "value": "requests"}]}]}`
	req, err := http.NewRequest(http.MethodPost, "http://"+r.addr+envoyrls.Procedure, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if got := resp.Header.Get("Content-Encoding"); got != "" {
		t.Errorf("Content-Encoding of a %d-byte answer: got %q, want none", len(b), got)
	}
}

// TestOversizedRequestRefused sends a request larger than the handler's
// default bound (64 KiB): it is refused before it is decoded, however
// large a size the sender declares.
func TestOversizedRequestRefused(t *testing.T) {
	r := newRig(t, "memory")
	body := `{"domain": "llm", "descriptors": [{"entries": [{"key": "generic_key", "value": "` + strings.Repeat("x", 70<<10) + `"}]}]}`
	req, err := http.NewRequest(http.MethodPost, "http://"+r.addr+envoyrls.Procedure, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "resource_exhausted") {
		t.Errorf("a %d-byte request: got %d %s, want 429 resource_exhausted", len(body), resp.StatusCode, b)
	}
}
