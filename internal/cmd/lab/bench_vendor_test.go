package lab

import (
	"bufio"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/store/memstore"
)

// vendorBenchJSON reads -o json output: one object per line.
func vendorBenchJSON(t *testing.T, out string) []map[string]any {
	t.Helper()
	var reps []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		reps = append(reps, m)
	}
	return reps
}

// checkVendorReport checks one run's report for shape and internal
// consistency; never for the figures themselves.
func checkVendorReport(t *testing.T, r map[string]any, vendor string) {
	t.Helper()
	num := func(k string) float64 {
		t.Helper()
		v, ok := r[k].(float64)
		if !ok {
			t.Fatalf("%s: field %q is %T (%v), want a number", r["mode"], k, r[k], r[k])
		}
		return v
	}
	if r["vendor"] != vendor {
		t.Errorf("vendor = %v, want %s", r["vendor"], vendor)
	}
	calls, n429, rate := num("calls"), num("vendor_429"), num("vendor_429_rate")
	if calls < 1 || n429 > calls || n429 < 0 {
		t.Errorf("%s: calls %v, vendor_429 %v: want calls ≥ vendor_429 ≥ 0 and some calls", r["mode"], calls, n429)
	}
	if rate < 0 || rate > 1 || math.Abs(rate-n429/calls) > 1e-12 {
		t.Errorf("%s: vendor_429_rate %v, want %v/%v in [0, 1]", r["mode"], rate, n429, calls)
	}
	kinds, _ := r["vendor_429_by_kind"].(map[string]any)
	var sum float64
	for _, k := range []string{"rate_limited", "too_large", "quota"} {
		v, ok := kinds[k].(float64)
		if !ok {
			t.Errorf("%s: vendor_429_by_kind[%s] missing: %v", r["mode"], k, kinds)
		}
		sum += v
	}
	if sum != n429 {
		t.Errorf("%s: 429s by kind sum to %v, want %v", r["mode"], sum, n429)
	}
	if admitted := num("admitted"); admitted+n429 > calls {
		t.Errorf("%s: admitted %v + 429s %v > calls %v", r["mode"], admitted, n429, calls)
	}
	dims, _ := r["dimensions"].([]any)
	wantMetrics := map[string][]string{"openai": {"requests", "tokens"}, "anthropic": {"requests", "input_tokens", "output_tokens"},
		"azure": {"requests", "tokens"}}[vendor]
	if len(dims) != len(wantMetrics) {
		t.Fatalf("%s: dimensions %v, want %v", r["mode"], dims, wantMetrics)
	}
	var tokenU float64
	for i, d := range dims {
		m := d.(map[string]any)
		counted, allowance, u := m["counted"].(float64), m["allowance"].(float64), m["utilisation"].(float64)
		if m["metric"] != wantMetrics[i] || allowance <= 0 || math.Abs(u-counted/allowance) > 1e-12 {
			t.Errorf("%s: dimension %v: want metric %s, utilisation = counted ÷ allowance", r["mode"], m, wantMetrics[i])
		}
		if m["metric"] == "requests" {
			if got := num("request_utilisation"); got != u {
				t.Errorf("%s: request_utilisation %v, want the requests dimension's %v", r["mode"], got, u)
			}
		} else {
			tokenU = max(tokenU, u)
		}
	}
	if got := num("token_utilisation"); got != tokenU {
		t.Errorf("%s: token_utilisation %v, want the highest token dimension's %v", r["mode"], got, tokenU)
	}
	client, _ := r["client"].(map[string]any)
	if cc, _ := client["calls"].(float64); cc < calls {
		t.Errorf("%s: the callers sent %v requests, fewer than the simulator's %v", r["mode"], cc, calls)
	}
	if se, _ := client["store_errors"].(float64); se != 0 {
		t.Errorf("%s: %v store errors: %v", r["mode"], se, client["first_error"])
	}
	for _, k := range []string{"added_ms", "waited_ms", "overhead_ms"} {
		p, _ := r[k].(map[string]any)
		if p50, p99 := p["p50"].(float64), p["p99"].(float64); p50 < 0 || p99 < p50 {
			t.Errorf("%s: %s = %v, want 0 ≤ p50 ≤ p99", r["mode"], k, p)
		}
	}
}

// TestBenchVendorSimMemory runs every mode against each simulated vendor
// for a short while on memory:// and checks the reports' shape.
func TestBenchVendorSimMemory(t *testing.T) {
	for _, vendor := range []string{"openai", "anthropic", "azure"} {
		t.Run(vendor, func(t *testing.T) {
			e := &testEnv{t: t, url: "memory://", mem: memstore.New()}
			out := e.ok("bench", "--vendor-sim", vendor, "--workers", "4", "--duration", "1s", "--sim-ttft", "5ms",
				"--sim-per-token", "0s", "--outage", "0.5@300ms+300ms", "-o", "json")
			reps := vendorBenchJSON(t, out)
			if len(reps) != 3 {
				t.Fatalf("%d reports, want one per mode:\n%s", len(reps), out)
			}
			for i, mode := range []string{"sluice", "naive", "local"} {
				r := reps[i]
				if r["mode"] != mode {
					t.Errorf("report %d: mode %v, want %s", i, r["mode"], mode)
				}
				if r["outage"] != "0.5@300ms+300ms" {
					t.Errorf("%s: outage %v", mode, r["outage"])
				}
				if n, ok := r["outage_429"].(float64); !ok || n > r["vendor_429"].(float64) {
					t.Errorf("%s: outage_429 %v, want at most vendor_429 %v", mode, r["outage_429"], r["vendor_429"])
				}
				checkVendorReport(t, r, vendor)
			}
		})
	}
}

// TestBenchVendorSimRedis runs the sluice mode in two child processes
// (this test binary, re-run) on the real redis-server.
func TestBenchVendorSimRedis(t *testing.T) {
	t.Setenv(childEnv, "1")
	e := redisEnv(t)
	// 3 s, not 1 s: the two children are this race-enabled test binary
	// started again, which on a loaded machine took most of a second before
	// its first call (2 of 20 runs made no call in 1 s).
	out := e.ok("bench", "--vendor-sim", "openai", "--modes", "sluice,local", "--processes", "2", "--workers", "2",
		"--duration", "3s", "--sim-ttft", "5ms", "--sync=false", "-o", "json")
	reps := vendorBenchJSON(t, out)
	if len(reps) != 2 || reps[0]["mode"] != "sluice" || reps[1]["mode"] != "local" {
		t.Fatalf("reports: %v", reps)
	}
	for _, r := range reps {
		if r["processes"] != 2.0 || r["sync"] != false {
			t.Errorf("%s: processes %v, sync %v; want 2, false", r["mode"], r["processes"], r["sync"])
		}
		checkVendorReport(t, r, "openai")
	}
}

func TestBenchVendorSimUsage(t *testing.T) {
	e := &testEnv{t: t, url: "memory://", mem: memstore.New()}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--vendor-sim", "gemini"}, `--vendor-sim "gemini": must be openai, anthropic or azure`},
		{[]string{"--vendor-sim", "azure", "--itpm", "5"}, "--itpm does not apply to --vendor-sim azure"},
		{[]string{"--vendor-sim", "azure", "--tpm", "100"}, "--tpm 100: Azure grants 6 RPM per 1000 TPM"},
		{[]string{"--vendor-sim", "azure", "--rules", "window=calendar"}, "Rules.Window: calendar"},
		{[]string{"--vendor-sim", "openai", "--itpm", "5"}, "--itpm does not apply"},
		{[]string{"--vendor-sim", "openai", "--modes", "fast"}, "is not a mode"},
		{[]string{"--vendor-sim", "openai", "--load", "spiky"}, "--load"},
		{[]string{"--vendor-sim", "openai", "--estimate-error", "1"}, "--estimate-error"},
		{[]string{"--vendor-sim", "openai", "--outage", "2@1s+1s"}, "--outage"},
		{[]string{"--vendor-sim", "openai", "--outage", "0.5@20s+1s", "--duration", "10s"}, "starts after"},
		{[]string{"--vendor-sim", "openai", "--dimension", "x"}, "--dimension does not apply"},
		{[]string{"--vendor-sim", "openai", "--processes", "3"}, "memory:// lives in one process"},
		{[]string{"--dimension", "x", "--modes", "sluice"}, "--modes applies to 'bench --vendor-sim' only"},
		{[]string{"--vendor-sim", "openai", "--rules", "window=calendar"}, "Rules.Window"},
		{[]string{"--vendor-sim", "openai", "--rules", "vendor;requests=500ms"}, "Rules.RequestInterval"},
		{[]string{"--vendor-sim", "openai", "--rules", "window=fixed;window=fixed"}, "listed twice"},
		{[]string{"--dimension", "x", "--rules", "vendor"}, "--rules applies to 'bench --vendor-sim' only"},
		{[]string{"--vendor-sim", "openai", "--cost-reading", "kept"}, "--cost-reading"},
		{[]string{"--vendor-sim", "openai", "--rules", "reading=kept"}, "Rules.Reading"},
		{[]string{"--vendor-sim", "anthropic", "--rules", "vendor;reading=admission_kept"}, "does not apply to vendor anthropic"},
		{[]string{"--vendor-sim", "anthropic", "--output-estimate", "mean"}, "--output-estimate"},
		{[]string{"--vendor-sim", "anthropic", "--output-estimate", "learned:1.5"}, "--output-estimate"},
	} {
		out, errs, code := e.run(append([]string{"bench"}, tc.args...)...)
		if code != clikit.ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q (stdout %q)", tc.args, code, errs, tc.want, out)
		}
	}
}

// TestBenchVendorSimRules runs the modes once under each reading of
// --rules, in order, and labels each report with its reading.
func TestBenchVendorSimRules(t *testing.T) {
	e := &testEnv{t: t, url: "memory://", mem: memstore.New()}
	out := e.ok("bench", "--vendor-sim", "openai", "--workers", "4", "--duration", "500ms", "--sim-ttft", "5ms",
		"--sim-per-token", "0s", "--modes", "sluice,naive", "--rules", "vendor;window=sliding,requests=10s;headers=flap", "-o", "json")
	reps := vendorBenchJSON(t, out)
	want := []struct{ rules, mode string }{
		{"vendor", "sluice"}, {"vendor", "naive"},
		{"window=sliding,requests=10s", "sluice"}, {"window=sliding,requests=10s", "naive"},
		{"headers=flap", "sluice"}, {"headers=flap", "naive"},
	}
	if len(reps) != len(want) {
		t.Fatalf("%d reports, want %d:\n%s", len(reps), len(want), out)
	}
	for i, w := range want {
		if got := reps[i]; got["rules"] != w.rules || got["mode"] != w.mode {
			t.Errorf("report %d: rules %v, mode %v; want %s, %s", i, got["rules"], got["mode"], w.rules, w.mode)
		}
		checkVendorReport(t, reps[i], "openai")
	}
}

// TestBenchVendorSimAzure runs the modes against the simulated Azure
// OpenAI: --tpm sets the tokens limit and, without --rpm, the requests
// limit Azure derives from it; the calls reach the deployment's path,
// where the transport meters them.
func TestBenchVendorSimAzure(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		rules     string
		rpm, tpm  float64
		estimates bool // the sluice mode's transport metered its calls
	}{
		{"derived rpm", []string{"--tpm", "200000"}, "vendor", 1200, 200000, true},
		{"rpm", []string{"--tpm", "200000", "--rpm", "600", "--client", "manual"}, "vendor", 600, 200000, false},
		{"rules", []string{"--rules", "window=sliding,reading=adjusted_to_usage"}, "window=sliding,reading=adjusted_to_usage", 6000, 1_000_000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &testEnv{t: t, url: "memory://", mem: memstore.New()}
			args := append([]string{"bench", "--vendor-sim", "azure", "--workers", "4", "--duration", "500ms", "--sim-ttft", "5ms",
				"--sim-per-token", "0s", "-o", "json"}, tc.args...)
			reps := vendorBenchJSON(t, e.ok(args...))
			if len(reps) != 3 {
				t.Fatalf("%d reports, want one per mode", len(reps))
			}
			for i, mode := range []string{"sluice", "naive", "local"} {
				r := reps[i]
				if r["mode"] != mode || r["rules"] != tc.rules {
					t.Errorf("report %d: mode %v, rules %v; want %s, %s", i, r["mode"], r["rules"], mode, tc.rules)
				}
				checkVendorReport(t, r, "azure")
				dims, _ := r["dimensions"].([]any)
				for j, want := range []struct {
					limit float64
					dim   string
				}{{tc.rpm, "azure#bench#rpm"}, {tc.tpm, "azure#bench#tpm"}} {
					d := dims[j].(map[string]any)
					if d["limit"] != want.limit || d["dimension"] != want.dim {
						t.Errorf("%s: %s: limit %v, dimension %v; want %v, %s", mode, d["metric"], d["limit"], d["dimension"], want.limit, want.dim)
					}
				}
				if c, _ := r["client"].(map[string]any); c["other"] != 0.0 || c["first_error"] != nil {
					t.Errorf("%s: %v calls failed: %v", mode, c["other"], c["first_error"])
				}
				if got := r["estimates"] != nil; mode == "sluice" && got != tc.estimates {
					t.Errorf("%s: estimates %v, want them: %v", mode, r["estimates"], tc.estimates)
				}
			}
		})
	}
}
