package lab

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/cmd/clikit"
)

func TestVendorsimServesAndReports(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var errb strings.Builder
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, []string{"vendorsim", "--vendor", "anthropic", "--rpm", "60", "--otpm", "0"},
			clikit.Env{Stdout: pw, Stderr: &errb})
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatalf("no output; stderr %s", errb.String())
	}
	first := lines.Text()
	m := regexp.MustCompile(`^vendorsim: anthropic listening on (http://127\.0\.0\.1:\d+) \(RPM 60, ITPM 30000\)$`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first line %q", first)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		resp, err := c.Post(m[1]+"/v1/messages", "application/json",
			strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, want)
		}
	}
	cancel()
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	if got := <-code; got != clikit.ExitOK {
		t.Fatalf("exit %d, stderr %s", got, errb.String())
	}
	for _, want := range []string{"2 requests, 1 admitted, 1 rate limited", "METRIC", "requests      60", "input_tokens  30000  1"} {
		if !strings.Contains(rest.String(), want) {
			t.Errorf("accounting lacks %q:\n%s", want, rest.String())
		}
	}
}

func TestVendorsimUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0"}, `--listen "0.0.0.0:0": not a loopback address`},
		{[]string{"--listen", ":8080"}, "not a loopback address"},
		{[]string{"--listen", "example.com:80"}, "not a loopback address"},
		{[]string{"--listen", "nonsense"}, `--listen "nonsense"`},
		{[]string{"--vendor", "gemini"}, `--vendor "gemini": must be openai, anthropic or azure`},
		{[]string{"--vendor", "openai", "--itpm", "5"}, "--itpm 5: does not apply to vendor openai"},
		{[]string{"--rpm", "-1"}, "--rpm -1: must be between 0 (none) and 10^12"},
		{[]string{"--ttft", "soon"}, "--ttft: distribution \"soon\""},
		{[]string{"--output-tokens", "uniform:9,1"}, "--output-tokens:"},
		{[]string{"--error-rate", "2"}, "--error-rate 2: must be between 0 and 1"},
		{[]string{"--output", "yaml"}, `--output "yaml"`},
	} {
		_, errs, code := run(t, nil, append([]string{"vendorsim"}, tc.args...)...)
		if code != clikit.ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("vendorsim %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}
