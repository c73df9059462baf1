package envoyrls_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// clientCmd is the test client of Envoy's reference rate limit server
// (github.com/envoyproxy/ratelimit), at a pinned version: a real RLS
// client written by others, speaking gRPC as Envoy does.
const clientCmd = "github.com/envoyproxy/ratelimit/src/client_cmd@v1.4.1-0.20260122083618-3fb702589d36"

// installClientCmd builds clientCmd into a temporary folder. The first
// build downloads the module through the Go module proxy; later ones come
// from the build cache. Outside CI a machine without the proxy skips the
// test; in CI it fails.
func installClientCmd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "install", clientCmd)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		msg := "go install " + clientCmd + ": " + err.Error() + "\n" + string(out)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return filepath.Join(dir, "client_cmd")
}

// TestReferenceClient runs the reference server's own client against the
// RLS: the requests it builds from -descriptors are decided by the
// rules, with the draft's headers; the requests bucket (3 a minute) is
// spent by the third request, and the fourth is over the limit.
func TestReferenceClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the reference client")
	}
	bin := installClientCmd(t)
	r := newRig(t, "memory")
	run := func(descriptors ...string) string {
		t.Helper()
		args := []string{"-dial_string", r.addr, "-domain", "llm"}
		for _, d := range descriptors {
			args = append(args, "-descriptors", d)
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("client_cmd %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		// The text format's spacing varies from run to run.
		return strings.Join(strings.Fields(string(out)), "")
	}
	tests := []struct {
		name        string
		descriptors []string
		want        []string
	}{
		{"a model's tokens", []string{"generic_key=tokens,model=gpt-4o"},
			[]string{`overall_code:OK`, `name:"openai#gpt-4o#tpm"`, `"RateLimit-Policy"`, `\"openai#gpt-4o#tpm\";q=10000;w=60`}},
		{"requests and tokens", []string{"generic_key=requests", "generic_key=tokens,model=gpt-4o"},
			[]string{`overall_code:OK`, `name:"openai#rpm"`}},
		{"an unmapped descriptor", []string{"generic_key=other"}, []string{`overall_code:OK`}},
		{"the second request", []string{"generic_key=requests"}, []string{`overall_code:OK`}},
		{"the third request", []string{"generic_key=requests"}, []string{`overall_code:OK`}},
		{"over the requests limit: no tokens either", []string{"generic_key=requests", "generic_key=tokens,model=gpt-4o"},
			[]string{`overall_code:OVER_LIMIT`, `code:OVER_LIMIT`, `"Retry-After"`}},
	}
	for _, tt := range tests {
		got := run(tt.descriptors...)
		for _, want := range tt.want {
			if !strings.Contains(got, want) {
				t.Errorf("%s: the response lacks %s:\n%s", tt.name, want, got)
			}
		}
	}
}
