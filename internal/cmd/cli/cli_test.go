package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/ontopix/sluice/internal/cmd/clikit"
)

// run executes args in-process and returns stdout, stderr and the exit code.
func run(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, Env{
		Stdout: &out, Stderr: &errb,
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		BuildInfo: func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/ontopix/sluice", Version: "v1.2.3"},
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}, true
		},
	})
	return out.String(), errb.String(), code
}

func TestVersion(t *testing.T) {
	out, _, code := run(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "sluice v1.2.3 (abc123)\n") || !strings.Contains(out, "go       go1.26.0") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, _, code = run(t, nil, "version", "--output", "json")
	var v clikit.VersionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if v.Version != "v1.2.3" || v.Go != "go1.26.0" || v.Module != "github.com/ontopix/sluice" || v.Revision != "abc123" {
		t.Errorf("%+v", v)
	}
	if got := clikit.ReadVersion(func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true
	}); got.Version != "devel" {
		t.Errorf("devel build reports %q", got.Version)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{nil, []string{"demo"}, `unknown command "demo"`}, // sluice-lab's
		{nil, []string{"bench"}, `unknown command "bench"`},
		{nil, []string{"vendorsim"}, `unknown command "vendorsim"`},
		{nil, []string{"version", "-o", "yaml"}, `--output "yaml"`},
		{nil, []string{"version", "extra"}, "takes no arguments"},
		{nil, []string{"status", "--store", "redis://u:secret@127.0.0.1:6379"}, "the URL contains a password"},
		{nil, []string{"status", "--store", "postgres://127.0.0.1:1/db?password=secret"}, "postgres://127.0.0.1:1/db?password=xxxxx: the URL contains a password (password=)"},
		{nil, []string{"bucket", "put", "x#y", "--type", "requests"}, `a new bucket needs --type and --capacity`},
		{nil, []string{"bucket", "put", "x#y", "--type", "bogus", "--capacity", "1"}, `--type "bogus"`},
		{nil, []string{"acquire"}, "needs at least 1 argument"},
		{nil, []string{"acquire", "a#b:0"}, "the cost after ':'"},
		{nil, []string{"release", "not-a-uuid"}, "must be a UUID"},
		{nil, []string{"penalize", "a#b", "--factor", "2"}, "--factor 2"},
		{nil, []string{"penalize", "a#b", "--factor", "0.0005"}, "--factor 0.0005: must be a multiple of 0.001"},
		{nil, []string{"penalize", "a#b", "--factor", "0.1234"}, "--factor 0.1234: must be a multiple of 0.001"},
		{nil, []string{"cooldown", "a#b"}, "give exactly one of --until and --for"},
		{nil, []string{"cooldown", "a#b", "--for", "1s", "--until", "2026-01-01T00:00:00Z"}, "give exactly one of --until and --for"},
		{nil, []string{"cooldown", "a#b", "--for", "soon"}, `--for "soon": must be a duration`},
		{nil, []string{"cooldown", "a#b", "--until", "tomorrow"}, `--until "tomorrow": must be an RFC 3339 time`},
		{nil, []string{"cooldown", "a#b", "--for", "25h"}, "--for 25h: must be 1ms to 24h"},
		{nil, []string{"cooldown", "a#b", "--for", "-5s"}, "--for -5s: must be 1ms to 24h"},
		{nil, []string{"cooldown", "a#b", "--until", "2001-01-01T00:00:00Z"}, "--until 2001-01-01T00:00:00Z: must be 1ms to 24h0m0s after now"},
		{nil, []string{"cooldown", "a#b", "--for", "1s", "-o", "yaml"}, `--output "yaml"`},
		{nil, []string{"sync", "a#b"}, "--remaining is required"},
		{nil, []string{"sync", "a#b", "--remaining", "-1"}, "--remaining -1: must be between 0 and 10^12 tokens"},
		{nil, []string{"sync", "a#b", "--remaining", "x"}, "invalid argument"},
		{nil, []string{"sync", "--remaining", "1"}, "takes 1 argument(s), got 0"},
		{nil, []string{"completion", "fish"}, "bash or zsh"},
		{nil, []string{"reconcile", "--every", "1ms"}, "--every 1ms"},
		{nil, []string{"status", "-o", "yaml"}, `--output "yaml"`},
		{nil, []string{"postgres", "migrate"}, "needs a PostgreSQL store (--store postgres://… or SLUICE_STORE), not memory://"},
		{map[string]string{"SLUICE_STORE": "redis://127.0.0.1:1"}, []string{"postgres", "version"}, "needs a PostgreSQL store"},
		{nil, []string{"postgres", "migrate", "-o", "yaml"}, `--output "yaml"`},
		{nil, []string{"postgres", "version", "x"}, "takes no arguments"},
		{nil, []string{"dynamodb", "create-table", "t1"}, "needs a DynamoDB store"},
		{nil, []string{"dynamodb", "create-table", "t1", "t2"}, "takes at most 1 argument"},
		{nil, []string{"dynamodb", "create-table", "--store", "dynamodb://?endpoint=http://127.0.0.1:1"}, "name the table"},
		{nil, []string{"dynamodb", "create-table", "ab", "--store", "dynamodb://?region=us-east-1"}, "3 to 255 characters"},
		{nil, []string{"acquire", "DIM:1000000000000000000"}, `"1000000000000000000": must be between 1 and 10^12 tokens`},
		{nil, []string{"acquire", "a#b", "lease#x"}, "lease#"},
		{nil, []string{"bucket", "list", "--store", "redis://127.0.0.1:99999"}, `port "99999": must be 1 to 65535`},
		{nil, []string{"bucket", "list", "--store", "rediss://127.0.0.1:0/0"}, `port "0": must be 1 to 65535`},
		{nil, []string{"bucket", "list", "--store", "redis+cluster://127.0.0.1:7000,127.0.0.1:70000"}, `port "70000": must be 1 to 65535`},
		{nil, []string{"bucket", "list", "--store", "redis+cluster://127.0.0.1:7000?addr=127.0.0.1:99999"}, `port "99999": must be 1 to 65535`},
		{nil, []string{"bucket", "list", "--store", "redis+cluster://127.0.0.1:7000?addr="}, "empty host in the cluster's host list"},
	} {
		out, errs, code := run(t, c.env, c.args...)
		if code != clikit.ExitUsage || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 and one line with %q", c.args, code, errs, out, c.want)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"version", "--help"}, {}, {"status", "--help"},
		{"bucket", "--help"}, {"bucket", "put", "--help"}, {"leases", "list", "--help"}, {"acquire", "--help"},
		{"release", "--help"}, {"penalize", "--help"}, {"cooldown", "--help"}, {"sync", "--help"}, {"reconcile", "--help"}, {"completion", "--help"},
		{"postgres", "--help"}, {"postgres", "migrate", "--help"}, {"postgres", "version", "--help"}, {"postgres"},
		{"dynamodb", "--help"}, {"dynamodb", "create-table", "--help"}} {
		out, _, code := run(t, nil, args...)
		if code != 0 || !strings.Contains(out, "Examples:") {
			t.Errorf("%v: exit %d, no examples:\n%s", args, code, out)
		}
	}
}

func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh"} {
		out, _, code := run(t, nil, "completion", sh)
		if code != 0 || !strings.Contains(out, "sluice") || len(out) < 1000 {
			t.Errorf("%s: exit %d, %d bytes", sh, code, len(out))
		}
	}
}
