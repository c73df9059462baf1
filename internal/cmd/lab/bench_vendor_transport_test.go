package lab

import (
	"slices"
	"strings"
	"testing"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/store/memstore"
)

// TestBenchVendorSimClients runs the sluice mode through both clients
// against both simulated vendors: the transport client (the default)
// sends every call with the official SDK through vendors/transport and
// reports its estimates against the simulator's counts; the manual client
// reports none.
func TestBenchVendorSimClients(t *testing.T) {
	for _, vendor := range []string{"openai", "anthropic"} {
		t.Run(vendor, func(t *testing.T) {
			e := &testEnv{t: t, url: "memory://", mem: memstore.New()}
			out := e.ok("bench", "--vendor-sim", vendor, "--modes", "sluice", "--client", "transport,manual",
				"--workers", "4", "--duration", "1s", "--sim-ttft", "5ms", "--sim-per-token", "0s", "-o", "json")
			reps := vendorBenchJSON(t, out)
			if len(reps) != 2 {
				t.Fatalf("%d reports, want one per client:\n%s", len(reps), out)
			}
			for i, want := range []string{clientTransport, clientManual} {
				r := reps[i]
				if r["mode"] != "sluice" || r["sluice_client"] != want {
					t.Errorf("report %d: mode %v, client %v; want sluice, %s", i, r["mode"], r["sluice_client"], want)
				}
				checkVendorReport(t, r, vendor)
				if c, _ := r["client"].(map[string]any); c["other"] != 0.0 {
					t.Errorf("%s: %v other errors: %v", want, c["other"], c["first_error"])
				}
			}
			est, ok := reps[0]["estimates"].(map[string]any)
			if !ok {
				t.Fatalf("transport report has no estimates: %v", reps[0])
			}
			if calls, _ := est["calls"].(float64); calls < 1 {
				t.Errorf("estimates over %v calls, want some", est["calls"])
			}
			if in, _ := est["input_counted"].(float64); in < 1 {
				t.Errorf("estimates: input counted %v, want some", est["input_counted"])
			}
			if _, ok := reps[1]["estimates"]; ok {
				t.Errorf("manual report has estimates: %v", reps[1]["estimates"])
			}
		})
	}
}

// The default client is the transport.
func TestBenchVendorSimDefaultClient(t *testing.T) {
	e := &testEnv{t: t, url: "memory://", mem: memstore.New()}
	out := e.ok("bench", "--vendor-sim", "openai", "--modes", "sluice,naive", "--workers", "2", "--duration", "500ms",
		"--sim-ttft", "5ms", "--sim-per-token", "0s", "-o", "json")
	reps := vendorBenchJSON(t, out)
	if len(reps) != 2 || reps[0]["sluice_client"] != clientTransport {
		t.Fatalf("reports %v, want sluice through the transport, then naive", reps)
	}
	if c, ok := reps[1]["sluice_client"]; ok {
		t.Errorf("naive report names a sluice client: %v", c)
	}
}

func TestParseClients(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"transport", []string{"transport"}, ""},
		{"manual", []string{"manual"}, ""},
		{"transport, manual", []string{"transport", "manual"}, ""},
		{"manual,transport", []string{"manual", "transport"}, ""},
		{"sdk", nil, `"sdk" is not a client`},
		{"", nil, `"" is not a client`},
		{"manual,manual", nil, "listed twice"},
	} {
		got, err := parseClients(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--client") {
				t.Errorf("parseClients(%q) = %v, %v; want an error naming --client and %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseClients(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestVBEstimatesMerge(t *testing.T) {
	var a, b vbEstimates
	a.add(90, 100, 0, 10)
	a.add(120, 100, 0, 20)
	b.add(50, 100, 7, 30)
	b.add(10, 0, 0, 0) // no input counted: left out
	var got vbEstimates
	got.merge(&a)
	got.merge(&b)
	got.merge(nil)
	want := vbEstimates{Calls: 3, InputEstimated: 260, InputCounted: 300, InputRatioMin: 0.5, InputRatioMax: 1.2,
		OutputEstimated: 7, OutputCounted: 60}
	if got != want {
		t.Errorf("merged %+v, want %+v", got, want)
	}
}

func TestBenchVendorSimClientUsage(t *testing.T) {
	e := &testEnv{t: t, url: "memory://", mem: memstore.New()}
	out, errs, code := e.run("bench", "--vendor-sim", "openai", "--client", "sdk")
	if code != clikit.ExitUsage || !strings.Contains(errs, `--client "sdk"`) {
		t.Errorf("exit %d, stderr %q; want exit 2 naming --client (stdout %q)", code, errs, out)
	}
	out, errs, code = e.run("bench", "--dimension", "x", "--client", "manual")
	if code != clikit.ExitUsage || !strings.Contains(errs, "--client applies to 'bench --vendor-sim' only") {
		t.Errorf("exit %d, stderr %q; want exit 2: --client applies to --vendor-sim only (stdout %q)", code, errs, out)
	}
}

// A call still waiting for its slot at the run's end is cancelled by the
// end, as the manual client's wait is: no slot.timeout warning per worker
// from the Client, though every worker waits past the end here (an input
// tokens limit of 5000 a minute is spent by the first calls).
func TestBenchVendorSimTransportRunEnd(t *testing.T) {
	e := &testEnv{t: t, url: "memory://", mem: memstore.New()}
	out, errs, code := e.run("bench", "--vendor-sim", "anthropic", "--modes", "sluice", "--itpm", "5000",
		"--workers", "4", "--duration", "1s", "--sim-ttft", "5ms", "--sim-per-token", "0s", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if strings.Contains(errs, "slot.timeout") {
		t.Errorf("stderr has slot.timeout warnings:\n%s", errs)
	}
	reps := vendorBenchJSON(t, out)
	if len(reps) != 1 {
		t.Fatalf("reports: %v", reps)
	}
	c, _ := reps[0]["client"].(map[string]any)
	if n, _ := c["abandoned"].(float64); n < 1 {
		t.Errorf("abandoned %v, want the workers waiting at the end", c["abandoned"])
	}
	if se, _ := c["store_errors"].(float64); se != 0 {
		t.Errorf("%v store errors: %v", se, c["first_error"])
	}
}
