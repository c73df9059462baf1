package lab

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// vbReport is one mode's result, printed as one JSON object by -o json.
// Counts and utilisation come from the simulator's accounting at the end of
// the run; the client section is what the callers saw.
type vbReport struct {
	Mode          string  `json:"mode"`
	SluiceClient  string  `json:"sluice_client,omitempty"` // transport or manual
	Vendor        string  `json:"vendor"`
	Store         string  `json:"store,omitempty"`
	Processes     int     `json:"processes"`
	Workers       int     `json:"workers"`
	Duration      string  `json:"duration"`
	Load          string  `json:"load"`
	Sync          bool    `json:"sync"`
	FollowLimits  bool    `json:"follow_limits"`
	Headroom      float64 `json:"headroom"`
	EstimateError float64 `json:"estimate_error"`
	Outage        string  `json:"outage,omitempty"`
	// Rules is the simulator's reading of the vendor's rules (see --rules).
	Rules string `json:"rules"`
	// Calls counts the requests the simulator received; Admitted those it
	// admitted; Vendor429 its 429s, by kind in Vendor429ByKind.
	Calls           int64            `json:"calls"`
	Admitted        int64            `json:"admitted"`
	Vendor429       int64            `json:"vendor_429"`
	Vendor429Rate   float64          `json:"vendor_429_rate"`
	Vendor429ByKind map[string]int64 `json:"vendor_429_by_kind"`
	// Outage429 counts the 429s decided during --outage (to 100 ms).
	Outage429 *int64 `json:"outage_429,omitempty"`
	// TokenUtilisation is the highest utilisation of the token limits (the
	// binding one); RequestUtilisation that of the requests limit.
	TokenUtilisation   float64        `json:"token_utilisation"`
	RequestUtilisation float64        `json:"request_utilisation"`
	Dimensions         []vbDimension  `json:"dimensions"`
	Added              vbPercentiles  `json:"added_ms"`
	Waited             vbPercentiles  `json:"waited_ms"`
	Overhead           vbPercentiles  `json:"overhead_ms"`
	Client             vbClientCounts `json:"client"`
	// Estimates compares the transport's estimates with the simulator's
	// counts (the transport client only).
	Estimates *vbEstimates `json:"estimates,omitempty"`
}

// vbDimension is one limit of the simulator.
type vbDimension struct {
	Metric      string  `json:"metric"`
	Dimension   string  `json:"dimension,omitempty"` // Sluice's dimension for it
	Limit       int64   `json:"limit"`
	Counted     int64   `json:"counted"`
	Allowance   int64   `json:"allowance"`
	Utilisation float64 `json:"utilisation"`
	Denied      int64   `json:"denied"`
	Debt        int64   `json:"debt"`
}

// vbPercentiles are percentiles over the HTTP requests, in milliseconds.
type vbPercentiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// vbClientCounts are the callers' own counts.
type vbClientCounts struct {
	Calls       int64  `json:"calls"`
	OK          int64  `json:"ok"`
	RateLimited int64  `json:"rate_limited"`
	TooLarge    int64  `json:"too_large"`
	Quota       int64  `json:"quota"`
	Other       int64  `json:"other"`
	Abandoned   int64  `json:"abandoned"`
	Cooled      int64  `json:"cooled"`
	Synced      int64  `json:"synced"`
	Resized     int64  `json:"resized"`
	StoreErrors int64  `json:"store_errors"`
	FirstError  string `json:"first_error,omitempty"`
}

func newVBReport(run vbRun, cfg vendorBenchConfig, store string, st vendorsim.Stats, p *vbPart) *vbReport {
	r := &vbReport{Mode: run.Mode, Vendor: string(run.Vendor), Processes: run.Processes, Workers: run.Workers,
		Duration: clikit.Dur(run.Duration), Load: run.Load, Sync: run.Sync, FollowLimits: run.Follow, Headroom: run.Headroom,
		EstimateError: run.EstimateError, Rules: cfg.sim.Rules.String(), Calls: st.Requests, Admitted: st.Admitted,
		Vendor429ByKind: map[string]int64{"rate_limited": st.RateLimited, "too_large": st.TooLarge, "quota": st.QuotaExceeded},
		Dimensions:      []vbDimension{},
		Added:           percentiles(p.Added), Waited: percentiles(p.Waited), Overhead: percentiles(p.Overhead),
		Client: vbClientCounts{Calls: p.Calls, OK: p.OK, RateLimited: p.RateLimited, TooLarge: p.TooLarge, Quota: p.Quota,
			Other: p.Other, Abandoned: p.Abandoned, Cooled: p.Cooled, Synced: p.Synced, Resized: p.Resized,
			StoreErrors: p.StoreErrors, FirstError: p.FirstErr}}
	if run.Mode == modeSluice {
		r.Store, r.SluiceClient, r.Estimates = store, run.Client, p.Estimates
	}
	r.Vendor429 = st.RateLimited + st.TooLarge + st.QuotaExceeded
	if r.Calls > 0 {
		r.Vendor429Rate = float64(r.Vendor429) / float64(r.Calls)
	}
	prof, _ := run.profile()
	for _, m := range st.Metrics {
		d := vbDimension{Metric: string(m.Metric), Limit: m.Limit, Counted: m.Counted, Allowance: m.Allowance,
			Denied: m.Denied, Debt: m.Debt}
		d.Dimension, _ = prof.Dimension(vendors.Metric(m.Metric))
		if m.Allowance > 0 {
			d.Utilisation = float64(m.Counted) / float64(m.Allowance)
		}
		switch m.Metric {
		case vendorsim.MetricRequests:
			r.RequestUtilisation = d.Utilisation
		case vendorsim.MetricTokens, vendorsim.MetricInputTokens, vendorsim.MetricOutputTokens:
			r.TokenUtilisation = max(r.TokenUtilisation, d.Utilisation)
		}
		r.Dimensions = append(r.Dimensions, d)
	}
	if len(cfg.schedule) > 0 {
		s := cfg.schedule[0]
		r.Outage = fmt.Sprintf("%g@%s+%s", s.Factor, clikit.Dur(s.At), clikit.Dur(s.For))
		n := rateLimitedBy(st.Series, s.At+s.For) - rateLimitedBy(st.Series, s.At)
		r.Outage429 = &n
	}
	return r
}

// rateLimitedBy returns the 429s counted by t, from the series point at or
// before t.
func rateLimitedBy(series []vendorsim.Point, t time.Duration) int64 {
	var n int64
	for _, p := range series {
		if p.At > t {
			break
		}
		n = p.RateLimited
	}
	return n
}

// percentiles returns p50, p99 and the maximum of samples in µs, as ms.
func percentiles(us []int64) vbPercentiles {
	if len(us) == 0 {
		return vbPercentiles{}
	}
	s := slices.Clone(us)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q * float64(len(s)-1))
		return float64(s[i]) / 1000
	}
	return vbPercentiles{P50: at(0.50), P99: at(0.99), Max: float64(s[len(s)-1]) / 1000}
}

// writeVendorBench prints the runs' reports as tables, then Sluice's
// ratios to the baselines.
func writeVendorBench(w io.Writer, reps []*vbReport) error {
	for _, r := range reps {
		fmt.Fprintf(w, "\n%s mode: %s, %d process(es) × %d workers, %s, %s load", r.label(), r.Vendor, r.Processes, r.Workers, r.Duration, r.Load)
		if r.Mode == modeSluice {
			fmt.Fprintf(w, ", sync %v, follow limits %v, headroom %g", r.Sync, r.FollowLimits, r.Headroom)
		}
		if r.Outage != "" {
			fmt.Fprintf(w, ", outage %s", r.Outage)
		}
		fmt.Fprintf(w, ", rules %s", r.Rules)
		fmt.Fprintf(w, "\ncalls %d, admitted %d, vendor 429s %d (%.3f%%: %d rate limited, %d too large, %d quota)",
			r.Calls, r.Admitted, r.Vendor429, 100*r.Vendor429Rate, r.Vendor429ByKind["rate_limited"], r.Vendor429ByKind["too_large"], r.Vendor429ByKind["quota"])
		if r.Outage429 != nil {
			fmt.Fprintf(w, ", %d during the outage", *r.Outage429)
		}
		fmt.Fprintf(w, "\ntime added per call: p50 %.1f ms, p99 %.1f ms (waiting p50 %.1f ms, p99 %.1f ms; overhead p50 %.2f ms, p99 %.2f ms)\n",
			r.Added.P50, r.Added.P99, r.Waited.P50, r.Waited.P99, r.Overhead.P50, r.Overhead.P99)
		writeEstimates(w, r.Estimates)
		if c := r.Client; c.StoreErrors > 0 || c.Other > 0 {
			fmt.Fprintf(w, "errors: %d store, %d other; first: %s\n", c.StoreErrors, c.Other, c.FirstError)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "METRIC\tLIMIT\tCOUNTED\tALLOWANCE\tUTILISATION\tDENIED")
		for _, d := range r.Dimensions {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f%%\t%d\n", d.Metric, d.Limit, d.Counted, d.Allowance, 100*d.Utilisation, d.Denied)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return writeRatios(w, reps)
}

// writeRatios prints, per reading of the rules, sluice's 429 rate and
// token utilisation against each baseline's.
func writeRatios(w io.Writer, reps []*vbReport) error {
	if len(reps) < 2 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULES\tMODE\tCALLS\t429 RATE\tTOKEN UTILISATION\tREQUEST UTILISATION\tSLUICE'S TOKEN UTILISATION ÷ THIS")
	for _, r := range reps {
		var s *vbReport
		for _, o := range reps {
			if o.Mode == modeSluice && o.Rules == r.Rules && s == nil {
				s = o
			}
		}
		ratio := "-"
		if s != nil && r != s && r.TokenUtilisation > 0 {
			ratio = fmt.Sprintf("%.2f×", s.TokenUtilisation/r.TokenUtilisation)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f%%\t%.1f%%\t%.1f%%\t%s\n", r.Rules, r.label(), r.Calls, 100*r.Vendor429Rate,
			100*r.TokenUtilisation, 100*r.RequestUtilisation, ratio)
	}
	return tw.Flush()
}
