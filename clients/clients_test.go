// Package clients_test runs the Python and TypeScript clients' own tests
// against a real sluice serve (the service on the memory store, with
// authentication), so that the clients are tested with the server they
// talk to.
package clients_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/limits"
	"github.com/ontopix/sluice/service"
	"github.com/ontopix/sluice/service/auth"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// token is the bearer token the clients' tests send.
const token = "slc_clients-test"

// limitsFile has the buckets the clients' tests use, and an OpenAI preset
// for Observe.
const limitsFile = `presets:
  - preset: openai
    model: gpt-4o
    rpm: 500
    tpm: 30000
  - preset: anthropic
    rpm: 50
    input_tpm: 40000
    output_tpm: 8000
dimensions:
  py#rpm: {type: requests, capacity: 3, refill: 3, per: 1m}
  py#tpm: {type: tokens, capacity: 10000, per: 1m}
  py#slots: {type: concurrent, capacity: 2}
  ts#rpm: {type: requests, capacity: 3, refill: 3, per: 1m}
  ts#tpm: {type: tokens, capacity: 10000, per: 1m}
  ts#slots: {type: concurrent, capacity: 2}
  py#many: {type: concurrent, capacity: 2}
  py#cancel: {type: concurrent, capacity: 2}
  py#nottl: {type: concurrent, capacity: 2}
  py#retry: {type: concurrent, capacity: 2}
  ts#hung: {type: concurrent, capacity: 2}
  ts#retry: {type: concurrent, capacity: 2}
`

// serve starts the service and returns its URL.
func serve(t *testing.T) string {
	t.Helper()
	f, err := limits.Parse("limits.yaml", []byte(limitsFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := limits.NewClient(ctx, memstore.New(), f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// A bucket a limits file creates starts empty unless reset; fill them.
	for _, b := range mustBuckets(t, c) {
		if err := c.PutBucket(context.Background(), b.Bucket, sluice.ResetTokens()); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256([]byte(token))
	a, err := auth.Parse("auth.yaml", []byte(fmt.Sprintf("principals:\n  - name: clients\n    token_sha256: %s\n    verbs: [admin]\n    dimensions: ['*']\n", hex.EncodeToString(sum[:]))))
	if err != nil {
		t.Fatal(err)
	}
	s, err := service.New(c, service.WithAuth(a), service.WithProfiles(f.Profiles()))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

func mustBuckets(t *testing.T, c *sluice.Client) []sluice.BucketState {
	t.Helper()
	bs, err := c.Buckets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// run runs a client's test command in dir with the service's URL and
// token in its environment, failing the test with its output.
func run(t *testing.T, url, dir string, name string, args ...string) {
	t.Helper()
	out, err := runOut(url, dir, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", out)
}

func runOut(url, dir string, name string, args ...string) ([]byte, error) {
	if _, err := exec.LookPath(name); err != nil {
		return nil, fmt.Errorf("the client's tests need %s: %w", name, err)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SLUICE_URL="+url, "SLUICE_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %v: %w\n%s", name, args, err, out)
	}
	return out, nil
}

// tsBuilt installs clients/typescript's locked dependencies and builds
// it, once per test binary.
var tsBuilt = sync.OnceValue(func() error {
	if _, err := runOut("", "typescript", "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"); err != nil {
		return err
	}
	_, err := runOut("", "typescript", "node", "node_modules/typescript/bin/tsc", "-p", ".")
	return err
})

// buildTypeScript fails the test when clients/typescript cannot be built.
func buildTypeScript(t *testing.T, _ string) {
	t.Helper()
	if err := tsBuilt(); err != nil {
		t.Fatal(err)
	}
}

// python is Debian's Python, with python3-pytest (.ci/run installs both).
const python = "/usr/bin/python3"

// TestPython runs clients/python's tests with pytest.
func TestPython(t *testing.T) {
	url := serve(t)
	run(t, url, "python", python, "-m", "pytest", "-v", "tests/test_client.py")
}

// TestTypeScript installs clients/typescript's locked dependencies, builds
// it and runs its node:test suite, which also drives the official OpenAI
// and Anthropic SDKs against the vendor simulator.
func TestTypeScript(t *testing.T) {
	url := serve(t)
	openai := sim(t, vendorsim.OpenAI, vendorsim.Limits{RPM: 2, TPM: 100_000})
	anthropic := sim(t, vendorsim.Anthropic, vendorsim.Limits{RPM: 2, ITPM: 100_000, OTPM: 100_000})
	buildTypeScript(t, url)
	t.Setenv("OPENAI_SIM_URL", openai)
	t.Setenv("ANTHROPIC_SIM_URL", anthropic)
	run(t, url, "typescript", "node", "--test", "dist/test/")
}

// sim starts a simulated vendor API and returns its URL.
func sim(t *testing.T, v vendorsim.Vendor, l vendorsim.Limits) string {
	t.Helper()
	s, err := vendorsim.New(vendorsim.Config{Vendor: v, Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs.URL
}
