package prometheus_test

// A checker of the PromQL this package ships (alerts, dashboard, docs)
// against the metrics the adapter registers. The syntax is parsed by
// promql_test.go; this file checks what the syntax names: every metric exists, every label matched or
// grouped by is one the adapter sets, every value matched on a label with
// a fixed set of values is one of them, counters are read through rate,
// irate or increase and gauges never are. promtool (rules_test.go) then
// parses and evaluates the same expressions with Prometheus's own engine.

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	sluiceprom "github.com/ontopix/sluice/observe/prometheus"
	prom "github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metricInfo is what the adapter registers under one series name.
type metricInfo struct {
	counter bool                       // a counter, or a histogram's _bucket, _sum or _count
	labels  map[string]map[string]bool // label name -> values seen
}

// schema maps series names to what the adapter registers.
type schema map[string]*metricInfo

// fixedLabels have a fixed set of values: a matcher on one must name
// values the adapter produces. extraValues are values of theirs the
// feeds of adapterSchema do not all produce.
var (
	fixedLabels = map[string]bool{"outcome": true, "result": true, "cause": true, "op": true, "kind": true, "status": true, "limit": true, "type": true}
	extraValues = map[string][]string{
		"status":  {"1xx", "2xx", "3xx", "4xx", "5xx", "none"},
		"outcome": {"passed", "counted", "settled", "partial", "refunded", "charged", "rejected", "failed", "denied"},
		"kind": {"other_error", "rate_limited", "quota_exhausted", "too_large", "overloaded", "concurrency_limited",
			"unavailable", "contention", "closed", "invalid", "other"},
		"limit": {"requests", "tokens", "other"},
	}
	// targetLabels are the labels Prometheus adds to every scraped series.
	targetLabels = map[string]bool{"instance": true, "job": true}
)

// adapterSchema registers everything the package exports on one registry
// — New's Observer fed one event of each kind, a StateCollector over a
// real Client, NewTransportEvents fed one event of each kind — and
// returns what it gathered.
func adapterSchema(t *testing.T) schema {
	t.Helper()
	ctx := context.Background()
	reg := prom.NewRegistry()
	obs, err := sluiceprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	feed(ctx, obs)
	col, err := sluiceprom.NewStateCollector(stateClient(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(col)
	events, err := sluiceprom.NewTransportEvents(reg)
	if err != nil {
		t.Fatal(err)
	}
	feedTransport(ctx, events)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	s := schema{}
	add := func(name string, counter bool, m *dto.Metric, extra ...string) {
		mi := s[name]
		if mi == nil {
			mi = &metricInfo{counter: counter, labels: map[string]map[string]bool{}}
			s[name] = mi
		}
		for _, lp := range m.GetLabel() {
			if mi.labels[lp.GetName()] == nil {
				mi.labels[lp.GetName()] = map[string]bool{}
			}
			mi.labels[lp.GetName()][lp.GetValue()] = true
		}
		for _, l := range extra {
			if mi.labels[l] == nil {
				mi.labels[l] = map[string]bool{}
			}
		}
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				add(mf.GetName(), true, m)
			case dto.MetricType_GAUGE:
				add(mf.GetName(), false, m)
			case dto.MetricType_HISTOGRAM:
				add(mf.GetName()+"_bucket", true, m, "le")
				add(mf.GetName()+"_sum", true, m)
				add(mf.GetName()+"_count", true, m)
			default:
				t.Fatalf("%s: unexpected type %v", mf.GetName(), mf.GetType())
			}
		}
	}
	return s
}

// check parses expr and checks it against s. It returns the labels the
// expression's selectors carry (for checking templates), and the errors
// found.
func (s schema) check(expr string) (map[string]bool, []error) {
	p, err := parse(expr)
	if err != nil {
		return nil, []error{err}
	}
	var errs []error
	labels := map[string]bool{}
	for l := range targetLabels {
		labels[l] = true
	}
	for _, sel := range p.sels {
		mi := s[sel.name]
		if mi == nil {
			errs = append(errs, fmt.Errorf("metric %s is not one the adapter registers", sel.name))
			continue
		}
		for l := range mi.labels {
			labels[l] = true
		}
		switch {
		case mi.counter && !counterFuncs[sel.call]:
			errs = append(errs, fmt.Errorf("%s is a counter read outside rate, irate or increase (in %q)", sel.name, sel.call))
		case !mi.counter && counterFuncs[sel.call]:
			errs = append(errs, fmt.Errorf("%s is a gauge read with %s", sel.name, sel.call))
		}
		for _, m := range sel.matchers {
			values, ok := mi.labels[m.label]
			if !ok && !targetLabels[m.label] {
				errs = append(errs, fmt.Errorf("%s has no label %s", sel.name, m.label))
				continue
			}
			if !fixedLabels[m.label] {
				continue
			}
			known := map[string]bool{}
			for v := range values {
				known[v] = true
			}
			for _, v := range extraValues[m.label] {
				known[v] = true
			}
			switch m.op {
			case "=", "!=":
				if !known[m.value] {
					errs = append(errs, fmt.Errorf("%s{%s%s%q}: %q is not a value of %s", sel.name, m.label, m.op, m.value, m.value, m.label))
				}
			case "=~", "!~":
				re, err := regexp.Compile("^(?:" + m.value + ")$")
				if err != nil {
					errs = append(errs, fmt.Errorf("%s{%s%s%q}: %v", sel.name, m.label, m.op, m.value, err))
					continue
				}
				matched := false
				for v := range known {
					matched = matched || re.MatchString(v)
				}
				if !matched {
					errs = append(errs, fmt.Errorf("%s{%s%s%q} matches no value of %s", sel.name, m.label, m.op, m.value, m.label))
				}
			}
		}
	}
	for _, g := range p.groups {
		if !labels[g] {
			errs = append(errs, fmt.Errorf("grouping by %s, which no metric of the expression has", g))
		}
	}
	return labels, errs
}
