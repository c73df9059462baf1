package lab

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// vendorBenchOptions are the flags of 'sluice-lab bench --vendor-sim'.
type vendorBenchOptions struct {
	vendor           string
	modes            string
	load             string
	sync, follow     bool
	outage           string
	estimateError    float64
	headroom         float64
	margin           time.Duration
	rpm, tpm         int64
	itpm, otpm       int64
	input, maxTokens string
	output           string
	ttft, perToken   string
	arrival          string
	seed             uint64
	clients          string
	rules            string
	costReading      string
	outputEstimate   string
}

// The published limits a benchmark run uses unless flags say otherwise:
// large enough that a 60 s run makes thousands of calls, with a token
// limit as the binding one for the default request sizes. Azure's RPM is
// the one Azure derives from its TPM (6 per 1000).
var vendorBenchLimits = map[vendorsim.Vendor]vendorsim.Limits{
	vendorsim.OpenAI:    {RPM: 3000, TPM: 1_000_000},
	vendorsim.Anthropic: {RPM: 2000, ITPM: 800_000, OTPM: 160_000},
	vendorsim.Azure:     {RPM: 6000, TPM: 1_000_000},
}

// vendorBenchFlags are the flags only 'bench --vendor-sim' reads.
var vendorBenchFlags = []string{"modes", "load", "sync", "follow-limits", "outage", "estimate-error", "headroom", "request-margin",
	"rpm", "tpm", "itpm", "otpm", "input-tokens", "max-tokens", "output-tokens", "sim-ttft", "sim-per-token", "sim-arrival", "seed", "client",
	"cost-reading", "output-estimate", "rules"}

// addVendorBench adds --vendor-sim and its flags to the bench command:
// with --vendor-sim, bench measures 429s and utilisation at a simulated
// vendor instead of checking a store's buckets.
func addVendorBench(cmd *cobra.Command, g *globals) {
	var o vendorBenchOptions
	cmd.Long += vendorBenchHelp
	cmd.Example += `
  sluice-lab bench --vendor-sim openai --store redis://127.0.0.1:6390/0 --processes 4 --workers 8 --duration 60s
  sluice-lab bench --vendor-sim anthropic --modes sluice --duration 60s --outage 0.5@20s+30s --sync=false -o json
  sluice-lab bench --vendor-sim azure --tpm 500000 --modes sluice,naive --duration 20s`
	f := cmd.Flags()
	f.StringVar(&o.vendor, "vendor-sim", "", "measure 429s and utilisation at a simulated vendor: openai, anthropic or azure")
	f.StringVar(&o.modes, "modes", "sluice,naive,local", "with --vendor-sim: the modes to run, one after the other")
	f.StringVar(&o.load, "load", loadUneven, "with --vendor-sim: uneven or uniform (see above)")
	f.BoolVar(&o.sync, "sync", true, "with --vendor-sim: lower Sluice's balances to the vendor's remaining headers")
	f.BoolVar(&o.follow, "follow-limits", true, "with --vendor-sim: follow a limit the vendor's headers lower")
	f.StringVar(&o.outage, "outage", "", "with --vendor-sim: FACTOR@START+DURATION, the vendor's limits scaled by FACTOR for a while (e.g. 0.5@20s+30s)")
	f.Float64Var(&o.estimateError, "estimate-error", 0.5, "with --vendor-sim: estimates are the actual counts × U(1−e, 1+e)")
	f.Float64Var(&o.headroom, "headroom", vendors.DefaultHeadroom, "with --vendor-sim: the profile's headroom below the vendor's rule (0 to 0.5)")
	f.DurationVar(&o.margin, "request-margin", vendors.DefaultRequestMargin, "with --vendor-sim: the arrival jitter the profile's requests buckets absorb (0 to 10s)")
	f.Int64Var(&o.rpm, "rpm", 0, "with --vendor-sim: requests per minute (default openai 3000, anthropic 2000, azure 6 per 1000 TPM)")
	f.Int64Var(&o.tpm, "tpm", 0, "with --vendor-sim openai or azure: tokens per minute (default 1000000)")
	f.Int64Var(&o.itpm, "itpm", 0, "with --vendor-sim anthropic: input tokens per minute (default 800000)")
	f.Int64Var(&o.otpm, "otpm", 0, "with --vendor-sim anthropic: output tokens per minute (default 160000)")
	f.StringVar(&o.input, "input-tokens", "lognormal:1000,0.5", "with --vendor-sim: prompt size in tokens (distribution)")
	f.StringVar(&o.maxTokens, "max-tokens", "uniform:256,1024", "with --vendor-sim: the requests' max_tokens (distribution)")
	f.StringVar(&o.output, "output-tokens", "lognormal:100,0.6", "with --vendor-sim: output tokens, at most max_tokens (distribution)")
	f.StringVar(&o.ttft, "sim-ttft", "lognormal:150ms,0.5", "with --vendor-sim: the vendor's time to first token (distribution of durations)")
	f.StringVar(&o.perToken, "sim-per-token", "1ms", "with --vendor-sim: the vendor's time per further output token")
	f.StringVar(&o.arrival, "sim-arrival", "0", "with --vendor-sim: the time a request takes to reach the vendor's counters (distribution of durations: its jitter)")
	f.Uint64Var(&o.seed, "seed", 1, "with --vendor-sim: seed of every random draw")
	f.StringVar(&o.rules, "rules", "vendor", "with --vendor-sim: the vendor's readings to run each mode under, separated by ';' (see above)")
	f.StringVar(&o.clients, "client", clientTransport, "with --vendor-sim: how the sluice mode calls: transport, manual, or both (transport,manual)")
	f.StringVar(&o.costReading, "cost-reading", "", "with --vendor-sim: the profile's reading of its token charges: adjusted_to_usage or admission_kept (default: the vendor's, see docs/vendors.md)")
	f.StringVar(&o.outputEstimate, "output-estimate", outputLearned, "with --vendor-sim anthropic: the transport's output estimate: learned (the 75th percentile of recent outputs), learned:Q (the Q quantile, 0 < Q ≤ 1) or fixed (min(max_tokens, 1024))")
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if o.vendor == "" {
			for _, name := range vendorBenchFlags {
				if c.Flags().Changed(name) {
					return clikit.Usagef("--%s applies to 'bench --vendor-sim' only", name)
				}
			}
			return run(c, args)
		}
		return runVendorBench(c, g, o)
	}
}

const vendorBenchHelp = `

With --vendor-sim openai|anthropic|azure, bench measures instead what a
fleet's calls do at a vendor: for each of --modes it starts a fresh
simulated vendor (vendors/vendorsim) on 127.0.0.1 with the published limits
of --rpm, --tpm, --itpm, --otpm (openai: RPM 3000, TPM 1000000; anthropic:
RPM 2000, ITPM 800000, OTPM 160000; azure: TPM 1000000 and the RPM Azure
derives from the TPM, 6 per 1000, unless --rpm is given; azure's calls go
to a deployment's path, /openai/deployments/NAME/chat/completions), runs
--processes × --workers callers against it for --duration, and reports,
from the simulator's own accounting, the calls, the vendor's 429s by kind,
and per limit what was counted against what the rule
allowed over the run (utilisation). The modes:

  sluice  --client transport (the default): every call is made with the
          vendor's official Go SDK, whose HTTP client's transport is
          vendors/transport (azure: openai-go's Azure options, metered by
          the transport's Middleware): it estimates the request body, acquires the
          profile's dimensions all-or-nothing at the cost model's admission
          charge (waiting in line), settles them to the usage the response
          reports, and passes the response to vendors.Reactor (cooldown on
          a 429, header sync, limit following). --client manual does the
          same by hand, charging the generated estimates below;
          --client transport,manual runs the mode once with each
  naive   no limiter; on a 429, wait the vendor's retry-after and retry
  local   each process its own golang.org/x/time/rate limiters at 1/P of
          each of the profile's buckets, with the same charges and
          settlement; on a 429, wait the retry-after and retry

Requests: prompt size (--input-tokens), max_tokens (--max-tokens) and the
output length (--output-tokens, at most max_tokens) are drawn per request;
the estimates the manual client and the local mode charge are the actual
counts × U(1−e, 1+e) with e = --estimate-error (the transport estimates the
request body itself; the report compares its estimates with the simulator's
counts). --load uneven (the default): the first process (the
first two from three processes on) calls with every worker back to back for
the whole run; every other process is idle, then bursts: it waits 4-12 s
(uniform), then all its workers call back to back for 1-3 s, and again.
--load uniform: every worker of every process calls back to back.
--outage 0.5@20s+30s halves the vendor's limits from 20 s to 50 s.
--sync=false and --follow-limits=false turn those reactions off.

--rules plays what the vendors do not publish: a list of readings
separated by ';', every mode running once under each. A reading is
"vendor" (the simulator's default model: token buckets, requests over 1 s;
for azure, Azure's published rule: tokens counted per calendar minute,
requests per calendar second) or comma-separated switches:
window=bucket|fixed|sliding (how per-minute
limits are counted: a continuous refill, calendar windows, or the last
period's usage), requests=1s|10s|1m (the interval the request limit is
enforced over), headers=flap|absurd|double (limit headers that alternate
with half the limit every 500 ms, report 10, or report twice the limit)
retry-after=absurd (every 429 says to wait a day) and
reading=adjusted_to_usage|admission_kept (OpenAI and Azure: whether the
token count of a completed call is corrected to its usage or keeps the
admission charge). For example
--rules 'vendor;window=fixed;window=sliding;requests=10s;headers=absurd'. On
memory:// the workers run in this process (--processes 1). -o json prints one
JSON object per mode, one per line.`

// vendorBenchConfig is a validated benchmark: the run template and the
// modes.
type vendorBenchConfig struct {
	run      vbRun
	modes    []string
	clients  []string          // the sluice mode's clients, one run each
	rules    []vendorsim.Rules // the readings, one run of every mode each
	schedule []vendorsim.Scale
	sim      vendorsim.Config
}

// config validates the flags; shared are bench's own flags.
func (o vendorBenchOptions) config(flags *pflag.FlagSet) (vendorBenchConfig, error) {
	var c vendorBenchConfig
	for _, name := range []string{"dimension", "limits", "reset", "hold", "slack"} {
		if flags.Changed(name) {
			return c, clikit.Usagef("--%s does not apply to 'bench --vendor-sim'", name)
		}
	}
	v := vendorsim.Vendor(o.vendor)
	lim, ok := vendorBenchLimits[v]
	if !ok {
		return c, clikit.Usagef("--vendor-sim %q: must be openai, anthropic or azure", o.vendor)
	}
	tokens := v == vendorsim.OpenAI || v == vendorsim.Azure
	for _, f := range []struct {
		name string
		val  int64
		into *int64
		ok   bool
	}{{"rpm", o.rpm, &lim.RPM, true}, {"tpm", o.tpm, &lim.TPM, tokens},
		{"itpm", o.itpm, &lim.ITPM, v == vendorsim.Anthropic}, {"otpm", o.otpm, &lim.OTPM, v == vendorsim.Anthropic}} {
		if !flags.Changed(f.name) {
			continue
		}
		if !f.ok {
			return c, clikit.Usagef("--%s does not apply to --vendor-sim %s", f.name, v)
		}
		if f.val < 1 || f.val > 1_000_000_000_000 {
			return c, clikit.Usagef("--%s %d: must be between 1 and 10^12", f.name, f.val)
		}
		*f.into = f.val
	}
	if v == vendorsim.Azure && flags.Changed("tpm") && !flags.Changed("rpm") {
		// Azure derives a deployment's RPM from its TPM.
		if lim.RPM = lim.TPM * vendors.AzureRPMPerThousandTPM / 1000; lim.RPM < 1 {
			return c, clikit.Usagef("--tpm %d: Azure grants 6 RPM per 1000 TPM, none for this TPM; set --rpm", lim.TPM)
		}
	}
	modes, err := parseModes(o.modes)
	if err != nil {
		return c, err
	}
	c.modes = modes
	if c.clients, err = parseClients(o.clients); err != nil {
		return c, err
	}
	if o.load != loadUneven && o.load != loadUniform {
		return c, clikit.Usagef("--load %q: must be uneven or uniform", o.load)
	}
	if !(o.estimateError >= 0 && o.estimateError < 1) {
		return c, clikit.Usagef("--estimate-error %v: must be at least 0 and below 1", o.estimateError)
	}
	if !(o.headroom >= 0 && o.headroom <= vendors.MaxHeadroom) {
		return c, clikit.Usagef("--headroom %v: must be between 0 and 0.5", o.headroom)
	}
	if o.margin < 0 || o.margin > vendors.MaxRequestMargin {
		return c, clikit.Usagef("--request-margin %v: must be between 0 and 10s", o.margin)
	}
	if o.outage != "" {
		s, err := parseOutage(o.outage)
		if err != nil {
			return c, err
		}
		c.schedule = []vendorsim.Scale{s}
	}
	c.run = vbRun{Vendor: v, Limits: lim, Headroom: o.headroom, Load: o.load, Sync: o.sync, Follow: o.follow,
		EstimateError: o.estimateError, Dists: dists{Input: o.input, MaxTokens: o.maxTokens, Output: o.output}, Seed: o.seed,
		CostReading: o.costReading, OutputEstimate: o.outputEstimate}
	if _, err := outputOption(o.outputEstimate); err != nil {
		return c, err
	}
	ms := o.margin.Milliseconds()
	c.run.RequestMargin = &ms
	if _, err := c.run.profile(); err != nil {
		return c, &clikit.UsageError{Err: err}
	}
	if _, err := newReqGen(v, c.run.Dists, o.estimateError, o.seed, 0); err != nil {
		return c, err
	}
	c.sim = vendorsim.Config{Vendor: v, Limits: lim, Seed: o.seed, Schedule: c.schedule, SeriesInterval: 100 * time.Millisecond}
	if c.sim.TimeToFirstToken, err = vendorsim.ParseLatency(o.ttft); err != nil {
		return c, clikit.Usagef("--sim-ttft %q: %v", o.ttft, err)
	}
	if c.sim.PerOutputToken, err = vendorsim.ParseLatency(o.perToken); err != nil {
		return c, clikit.Usagef("--sim-per-token %q: %v", o.perToken, err)
	}
	if c.sim.ArrivalJitter, err = vendorsim.ParseLatency(o.arrival); err != nil {
		return c, clikit.Usagef("--sim-arrival %q: %v", o.arrival, err)
	}
	if c.rules, err = parseRulesList(o.rules); err != nil {
		return c, err
	}
	for _, r := range c.rules {
		sim := c.sim
		sim.Rules = r
		if _, err := vendorsim.New(sim); err != nil {
			return c, clikit.Usagef("--rules %q: %v", r, err)
		}
	}
	return c, nil
}

// parseRulesList reads --rules: readings separated by ';', each at most
// once (see vendorsim.ParseRules).
func parseRulesList(s string) ([]vendorsim.Rules, error) {
	var out []vendorsim.Rules
	for _, part := range strings.Split(s, ";") {
		r, err := vendorsim.ParseRules(part)
		if err != nil {
			return nil, clikit.Usagef("--rules %q: %v", s, err)
		}
		if slices.Contains(out, r) {
			return nil, clikit.Usagef("--rules %q: %s is listed twice", s, r)
		}
		out = append(out, r)
	}
	return out, nil
}

// parseModes reads --modes: a comma-separated list of sluice, naive and
// local, each at most once.
func parseModes(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, m := range strings.Split(s, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case modeSluice, modeNaive, modeLocal:
		default:
			return nil, clikit.Usagef("--modes %q: %q is not a mode; use sluice, naive and local, comma-separated", s, m)
		}
		if seen[m] {
			return nil, clikit.Usagef("--modes %q: %s is listed twice", s, m)
		}
		seen[m] = true
		out = append(out, m)
	}
	return out, nil
}

// parseOutage reads FACTOR@START+DURATION, e.g. 0.5@20s+30s.
func parseOutage(s string) (vendorsim.Scale, error) {
	bad := func(why string) (vendorsim.Scale, error) {
		return vendorsim.Scale{}, clikit.Usagef("--outage %q: %s (e.g. 0.5@20s+30s: limits halved from 20 s for 30 s)", s, why)
	}
	f, rest, ok := strings.Cut(s, "@")
	if !ok {
		return bad("missing @START")
	}
	at, dur, ok := strings.Cut(rest, "+")
	if !ok {
		return bad("missing +DURATION")
	}
	factor, err := strconv.ParseFloat(f, 64)
	if err != nil || !(factor > 0 && factor < 1) {
		return bad(fmt.Sprintf("factor %q must be a number between 0 and 1, exclusive", f))
	}
	start, err := time.ParseDuration(at)
	if err != nil || start < 0 {
		return bad(fmt.Sprintf("start %q must be a duration, at least 0", at))
	}
	d, err := time.ParseDuration(dur)
	if err != nil || d <= 0 {
		return bad(fmt.Sprintf("duration %q must be a positive duration", dur))
	}
	return vendorsim.Scale{At: start, For: d, Factor: factor}, nil
}
