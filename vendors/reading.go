package vendors

import "github.com/ontopix/sluice/bucket"

// WithReading returns a copy of m with each metric in ms read as r; with
// no metric given, every metric that settles. A metric m does not count,
// one that is never settled (requests, concurrency slots), and a reading
// other than AdjustedToUsage and AdmissionKept are a *bucket.FieldError.
func (m CostModel) WithReading(r Reading, ms ...Metric) (CostModel, error) {
	if r != AdjustedToUsage && r != AdmissionKept {
		return m, &bucket.FieldError{Field: "cost_reading", Value: r, Reason: "must be adjusted_to_usage or admission_kept"}
	}
	out := m
	out.Metrics = append([]MetricCost(nil), m.Metrics...)
	if len(ms) == 0 {
		for i := range out.Metrics {
			if out.Metrics[i].Settle != SettleNever {
				out.Metrics[i].Reading = r
			}
		}
		return out, nil
	}
	for _, metric := range ms {
		i := out.index(metric)
		switch {
		case i < 0:
			return m, &bucket.FieldError{Field: "cost_reading[" + metricName(metric) + "]", Value: r, Reason: "the " + string(m.Vendor) + " cost model does not count " + metricName(metric)}
		case out.Metrics[i].Settle == SettleNever:
			return m, &bucket.FieldError{Field: "cost_reading[" + metricName(metric) + "]", Value: r, Reason: metricName(metric) + " is never settled, so it has no reading"}
		}
		out.Metrics[i].Reading = r
	}
	return out, nil
}

// Reading returns how the model reads metric's settlement, and false
// when the model does not count metric.
func (m CostModel) Reading(metric Metric) (Reading, bool) {
	if i := m.index(metric); i >= 0 {
		return m.Metrics[i].Reading, true
	}
	return 0, false
}

func (m CostModel) index(metric Metric) int {
	for i, mc := range m.Metrics {
		if mc.Metric == metric {
			return i
		}
	}
	return -1
}

// WithCostReading reads the settlement of each metric in ms as r, in
// place of the vendor's default; with no metric given, every token metric
// of the profile. AdjustedToUsage settles a call to its usage, refunding
// what the admission charged in excess; AdmissionKept settles to no less
// than the admission charge. Each vendor's cost model (OpenAICost,
// AnthropicCost, …) says which reading it uses by default and why. A
// metric the vendor does not count, or one never settled (requests), makes
// the profile fail with a *bucket.FieldError.
func WithCostReading(r Reading, ms ...Metric) ProfileOption {
	return func(o *options) {
		o.readings = append(o.readings, readingOpt{r: r, ms: ms})
	}
}

// readingOpt is one WithCostReading.
type readingOpt struct {
	r  Reading
	ms []Metric
}

// applyReadings applies the WithCostReading options to the profile's
// cost model, in the order given.
func (b *builder) applyReadings() {
	for _, ro := range b.opts.readings {
		if b.err != nil {
			return
		}
		c, err := b.p.Cost.WithReading(ro.r, ro.ms...)
		if err != nil {
			b.err = err
			return
		}
		b.p.Cost = c
	}
}
