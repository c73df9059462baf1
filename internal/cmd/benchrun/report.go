package benchrun

import (
	"slices"
	"time"

	"github.com/ontopix/sluice/internal/cmd/jsonout"
	"github.com/ontopix/sluice/internal/cmd/verify"
	"github.com/ontopix/sluice/store"
)

// Report is a whole run: every process's part merged and verified. Its
// durations print as strings ("1.5s").
type Report struct {
	Processes  int              `json:"processes"`
	Workers    int              `json:"workers_per_process"`
	Elapsed    jsonout.Duration `json:"elapsed"`
	Granted    int64            `json:"granted"`
	Denied     int64            `json:"retry_in"`
	Errors     int64            `json:"errors"`
	FirstErr   string           `json:"first_error,omitempty"`
	Throughput float64          `json:"granted_per_second"`
	Acquires   int              `json:"acquire_calls"`
	P50        jsonout.Duration `json:"p50"`
	P99        jsonout.Duration `json:"p99"`
	Max        jsonout.Duration `json:"max"`
	Slack      jsonout.Duration `json:"slack"`
	Events     int              `json:"events"`
	// Wait is the workers' wait strategy, poll or reserve.
	Wait string `json:"wait"`
	// Timeouts counts waits that ended with a slot timeout.
	Timeouts int64 `json:"timeouts"`
	// Calls counts the workers' store calls; CallsPerGrant divides them
	// by the grants.
	Calls         int64          `json:"store_calls"`
	CallsPerGrant float64        `json:"store_calls_per_grant"`
	Classes       []ClassReport  `json:"classes"`
	Verdict       *verify.Report `json:"verdict"`
	OK            bool           `json:"ok"`
}

// Merge verifies the parts of a run of cfg against buckets (in the order
// of cfg.Items, which the parts index). slack widens every window for logs
// from disagreeing clocks.
func Merge(parts []*Part, buckets []store.Bucket, cfg Config, slack time.Duration) (*Report, error) {
	items := cfg.Items
	workers := 0
	for _, cl := range cfg.classes() {
		workers += cl.Workers
	}
	wait := cfg.Wait
	if wait == "" {
		wait = "poll"
	}
	r := &Report{Processes: len(parts), Workers: workers, Slack: jsonout.Duration(slack), Wait: wait}
	r.Classes = classReports(parts, cfg)
	for _, c := range r.Classes {
		r.Timeouts += c.Timeouts
	}
	var lat []int64
	var evs []verify.Event
	var start, end time.Time
	for i, p := range parts {
		r.Granted += p.Granted
		r.Denied += p.Denied
		r.Errors += p.Errors
		r.Calls += p.Calls
		if r.FirstErr == "" {
			r.FirstErr = p.FirstErr
		}
		lat = append(lat, p.LatencyUS...)
		for _, e := range p.Events {
			evs = append(evs, verify.Event{Time: time.UnixMilli(e.T), Dimension: items[e.I].Dimension, Kind: e.K, Milli: e.M})
		}
		if i == 0 || p.Start.Before(start) {
			start = p.Start
		}
		if i == 0 || p.End.After(end) {
			end = p.End
		}
	}
	// Equal times: releases before grants, so that a slot freed and taken
	// in the same millisecond is not counted twice.
	slices.SortStableFunc(evs, func(a, b verify.Event) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return rank(a.Kind) - rank(b.Kind)
	})
	r.Events = len(evs)
	if r.Granted > 0 {
		r.CallsPerGrant = float64(r.Calls) / float64(r.Granted)
	}
	r.Elapsed = jsonout.Duration(end.Sub(start))
	if r.Elapsed > 0 {
		r.Throughput = float64(r.Granted) / r.Elapsed.D().Seconds()
	}
	slices.Sort(lat)
	r.Acquires = len(lat)
	if n := len(lat); n > 0 {
		us := func(i int) jsonout.Duration { return jsonout.Duration(time.Duration(lat[i]) * time.Microsecond) }
		r.P50, r.P99, r.Max = us((n-1)/2), us((n-1)*99/100), us(n-1)
	}
	v, err := verify.Check(verify.Input{Buckets: buckets, Events: evs, Start: start, End: end, Slack: slack})
	if err != nil {
		return nil, err
	}
	r.Verdict, r.OK = v, v.OK()
	return r, nil
}

func rank(k verify.Kind) int {
	if k == verify.Release {
		return 0
	}
	return 1
}
