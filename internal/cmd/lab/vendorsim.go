package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// vendorsimOptions are the flags of 'sluice-lab vendorsim'.
type vendorsimOptions struct {
	vendor, listen             string
	allowRemote                bool
	rpm, tpm, rpd, tpd         int64
	itpm, otpm                 int64
	ttft, perToken, outputToks string
	errorRate                  float64
	seed                       uint64
	duration                   time.Duration
	output                     string
}

// vendorDefaults are the limits a vendor gets for the flags not given: a
// first usage tier.
var vendorDefaults = map[vendorsim.Vendor]vendorsim.Limits{
	vendorsim.OpenAI:    {RPM: 500, TPM: 30000},
	vendorsim.Anthropic: {RPM: 50, ITPM: 30000, OTPM: 8000},
	vendorsim.Azure:     {TPM: 30000},
}

func newVendorsimCmd(_ *globals) *cobra.Command {
	o := vendorsimOptions{}
	cmd := &cobra.Command{
		Use:   "vendorsim",
		Short: "Run a local OpenAI, Anthropic or Azure OpenAI API that enforces the vendor's rate limits",
		Long: `vendorsim serves a simulated vendor API over HTTP: OpenAI Chat Completions,
Responses and Embeddings (--vendor openai or azure) or Anthropic Messages
(--vendor anthropic), JSON and streaming, answering with filler text after a
simulated latency. It enforces the vendor's rate-limit rule exactly (token
buckets for OpenAI and Anthropic, calendar windows for Azure), sends the
vendor's rate-limit headers and 429 bodies, and accounts for everything it
admitted. Point an SDK's base URL at it with any API key.

It prints the address it listens on, then serves until interrupted (or for
--duration), and prints its accounting: per limit, what it counted, the most
the rule allowed over the run, and the 429s.

Limits not given take the vendor's first-tier defaults (openai: --rpm 500
--tpm 30000; anthropic: --rpm 50 --itpm 30000 --otpm 8000; azure: --tpm 30000,
RPM 6 per 1000 TPM); 0 means no limit. Distributions are N, fixed:N,
uniform:LO,HI or lognormal:MEDIAN,SIGMA, with durations for the latencies
(e.g. --ttft lognormal:400ms,0.5). A request may force its output length
with the header X-Vendorsim-Output-Tokens.

It listens on loopback only unless --allow-remote.`,
		Example: `  sluice-lab vendorsim --vendor openai --rpm 60 --tpm 10000
  sluice-lab vendorsim --vendor anthropic --listen 127.0.0.1:8080 --ttft 300ms --per-token 10ms
  sluice-lab vendorsim --vendor openai --duration 30s --output json`,
		Args: clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.config(cmd)
			if err != nil {
				return err
			}
			return runVendorsim(cmd.Context(), cfg, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.vendor, "vendor", "openai", "vendor to simulate: openai, anthropic or azure")
	f.StringVar(&o.listen, "listen", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	f.BoolVar(&o.allowRemote, "allow-remote", false, "allow a listen address that is not loopback")
	f.Int64Var(&o.rpm, "rpm", 0, "requests per minute")
	f.Int64Var(&o.tpm, "tpm", 0, "tokens per minute (openai, azure)")
	f.Int64Var(&o.rpd, "rpd", 0, "requests per day (openai)")
	f.Int64Var(&o.tpd, "tpd", 0, "tokens per day (openai)")
	f.Int64Var(&o.itpm, "itpm", 0, "input tokens per minute (anthropic)")
	f.Int64Var(&o.otpm, "otpm", 0, "output tokens per minute (anthropic)")
	f.StringVar(&o.ttft, "ttft", "0s", "time to first token (distribution of durations)")
	f.StringVar(&o.perToken, "per-token", "0s", "time per further output token (distribution of durations)")
	f.StringVar(&o.outputToks, "output-tokens", "100", "output tokens per response, up to the request's max tokens (distribution)")
	f.Float64Var(&o.errorRate, "error-rate", 0, "share of requests answered with the overloaded error (OpenAI 503, Anthropic 529), 0 to 1")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the random draws")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (0: until interrupted)")
	f.StringVarP(&o.output, "output", "o", "table", "format of the final accounting: table or json")
	return cmd
}

// config validates the flags into a simulator configuration.
func (o vendorsimOptions) config(cmd *cobra.Command) (vendorsim.Config, error) {
	if err := clikit.OutputFlag(o.output); err != nil {
		return vendorsim.Config{}, err
	}
	v := vendorsim.Vendor(o.vendor)
	lim, ok := vendorDefaults[v]
	if !ok {
		return vendorsim.Config{}, clikit.Usagef("--vendor %q: must be openai, anthropic or azure", o.vendor)
	}
	if err := checkListen(o.listen, o.allowRemote); err != nil {
		return vendorsim.Config{}, err
	}
	if o.duration < 0 {
		return vendorsim.Config{}, clikit.Usagef("--duration %v: must not be negative", o.duration)
	}
	for _, f := range []struct {
		name string
		val  int64
		into *int64
	}{{"rpm", o.rpm, &lim.RPM}, {"tpm", o.tpm, &lim.TPM}, {"rpd", o.rpd, &lim.RPD}, {"tpd", o.tpd, &lim.TPD},
		{"itpm", o.itpm, &lim.ITPM}, {"otpm", o.otpm, &lim.OTPM}} {
		if cmd.Flags().Changed(f.name) {
			*f.into = f.val
		}
	}
	cfg := vendorsim.Config{Vendor: v, Limits: lim, ErrorRate: o.errorRate, Seed: o.seed}
	var err error
	if cfg.TimeToFirstToken, err = vendorsim.ParseLatency(o.ttft); err != nil {
		return cfg, clikit.Usagef("--ttft: %v", err)
	}
	if cfg.PerOutputToken, err = vendorsim.ParseLatency(o.perToken); err != nil {
		return cfg, clikit.Usagef("--per-token: %v", err)
	}
	if cfg.OutputTokens, err = vendorsim.ParseDist(o.outputToks); err != nil {
		return cfg, clikit.Usagef("--output-tokens: %v", err)
	}
	if _, err := vendorsim.New(cfg); err != nil {
		var fe *vendorsim.FieldError
		if errors.As(err, &fe) {
			return cfg, clikit.Usagef("--%s %v: %s", flagOf(fe.Field), fe.Value, fe.Reason)
		}
		return cfg, clikit.Usagef("%v", err)
	}
	return cfg, nil
}

// flagOf names the flag behind a configuration field.
func flagOf(field string) string {
	if l, ok := strings.CutPrefix(field, "Limits."); ok {
		return strings.ToLower(l)
	}
	if field == "ErrorRate" {
		return "error-rate"
	}
	return strings.ToLower(field)
}

// checkListen refuses an address that is not loopback, unless allowed.
func checkListen(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return clikit.Usagef("--listen %q: %v", addr, err)
	}
	if allowRemote {
		return nil
	}
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return clikit.Usagef("--listen %q: not a loopback address; the simulator accepts any API key, so pass --allow-remote to serve other hosts", addr)
}

// runVendorsim serves until ctx is done or the duration has passed, then
// prints the accounting.
func runVendorsim(ctx context.Context, cfg vendorsim.Config, o vendorsimOptions, out io.Writer) error {
	sim, err := vendorsim.New(cfg)
	if err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.listen)
	if err != nil {
		return fmt.Errorf("vendorsim: listen on %s: %w", o.listen, err)
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Fprintf(out, "vendorsim: %s listening on http://%s (%s)\n", cfg.Vendor, ln.Addr(), describeLimits(cfg))
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	select {
	case <-ctx.Done():
	case err := <-done:
		return fmt.Errorf("vendorsim: serve: %w", err)
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	st := sim.Stats()
	if o.output == "json" {
		return clikit.WriteJSON(out, vendorsimView(st))
	}
	return writeVendorsimTable(out, st)
}

func describeLimits(cfg vendorsim.Config) string {
	l := cfg.Limits
	var parts []string
	for _, f := range []struct {
		name string
		v    int64
	}{{"RPM", l.RPM}, {"TPM", l.TPM}, {"RPD", l.RPD}, {"TPD", l.TPD}, {"ITPM", l.ITPM}, {"OTPM", l.OTPM}} {
		if f.v > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", f.name, f.v))
		}
	}
	if len(parts) == 0 {
		return "no limits"
	}
	return strings.Join(parts, ", ")
}

// vendorsimMetric is one limit in the JSON accounting.
type vendorsimMetric struct {
	Metric      string  `json:"metric"`
	Limit       int64   `json:"limit"`
	Counted     int64   `json:"counted"`
	Allowance   int64   `json:"allowance"`
	Utilisation float64 `json:"utilisation"`
	Denied      int64   `json:"denied"`
}

type vendorsimStats struct {
	Vendor        string            `json:"vendor"`
	Elapsed       string            `json:"elapsed"`
	Requests      int64             `json:"requests"`
	Admitted      int64             `json:"admitted"`
	RateLimited   int64             `json:"rate_limited"`
	TooLarge      int64             `json:"too_large"`
	QuotaExceeded int64             `json:"quota_exceeded"`
	Overloaded    int64             `json:"overloaded"`
	BadRequests   int64             `json:"bad_requests"`
	Metrics       []vendorsimMetric `json:"metrics"`
}

func vendorsimView(st vendorsim.Stats) vendorsimStats {
	v := vendorsimStats{Vendor: string(st.Vendor), Elapsed: clikit.Dur(st.Elapsed.Round(time.Millisecond)),
		Requests: st.Requests, Admitted: st.Admitted, RateLimited: st.RateLimited, TooLarge: st.TooLarge,
		QuotaExceeded: st.QuotaExceeded, Overloaded: st.Overloaded, BadRequests: st.BadRequests, Metrics: []vendorsimMetric{}}
	for _, m := range st.Metrics {
		u := 0.0
		if m.Allowance > 0 {
			u = float64(m.Counted) / float64(m.Allowance)
		}
		v.Metrics = append(v.Metrics, vendorsimMetric{Metric: string(m.Metric), Limit: m.Limit, Counted: m.Counted,
			Allowance: m.Allowance, Utilisation: u, Denied: m.Denied})
	}
	return v
}

func writeVendorsimTable(out io.Writer, st vendorsim.Stats) error {
	v := vendorsimView(st)
	fmt.Fprintf(out, "%s for %s: %d requests, %d admitted, %d rate limited, %d too large, %d quota, %d overloaded, %d bad\n",
		v.Vendor, v.Elapsed, v.Requests, v.Admitted, v.RateLimited, v.TooLarge, v.QuotaExceeded, v.Overloaded, v.BadRequests)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tLIMIT\tCOUNTED\tALLOWANCE\tUTILISATION\tDENIED")
	for _, m := range v.Metrics {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f%%\t%d\n", m.Metric, m.Limit, m.Counted, m.Allowance, 100*m.Utilisation, m.Denied)
	}
	return tw.Flush()
}
