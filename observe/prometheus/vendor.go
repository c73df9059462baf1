package prometheus

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/ontopix/sluice/observe/internal/label"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	prom "github.com/prometheus/client_golang/prometheus"
)

// The values of the status label of sluice_vendor_calls_total besides
// "1xx" to "5xx": "none" when no response came.
const noStatus = "none"

// The values of the limit label of sluice_vendor_rate_limits_total.
const (
	limitRequests = "requests"
	limitTokens   = "tokens"
	limitOther    = "other"
)

// vendorMetrics holds the vendor-side series fed by a Transport's events.
type vendorMetrics struct {
	calls, limited      *prom.CounterVec
	wait, latency, took *prom.HistogramVec
	drift, remaining    *prom.GaugeVec
	models              *label.Dimensions[string]
	dims                *label.Dimensions[string]
}

// NewTransportEvents registers the vendor-side metrics on reg and returns
// the transport.EventFunc that updates them: pass it to transport.New with
// transport.WithEvents (to feed another EventFunc too, call both from one
// of your own). The options that apply are WithMaxModels (the model label
// is capped per (vendor, model) pair), WithMaxDimensions (the drift
// gauges' dimension label) and WithConstLabels. It fails as New does: on an
// invalid option (an error matching sluice.ErrInvalid), a nil reg, or a
// metric reg refuses, leaving nothing registered. The EventFunc is safe
// for concurrent use.
//
// The metrics are listed in the package documentation.
func NewTransportEvents(reg prom.Registerer, opts ...Option) (transport.EventFunc, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if reg == nil {
		return nil, errNilRegisterer()
	}
	m := &vendorMetrics{
		calls: counter(c, "sluice_vendor_calls_total",
			"Calls through the vendor transport, by HTTP status class (1xx to 5xx, none when no response came) and outcome.",
			"vendor", "model", "status", "outcome"),
		limited: counter(c, "sluice_vendor_rate_limits_total",
			"Vendor 429 responses, by the limit the response named (requests, tokens, other) and its kind (rate_limited, quota_exhausted, concurrency_limited, ...).",
			"vendor", "model", "limit", "kind"),
		wait: histogram(c, "sluice_vendor_wait_seconds", "Time calls through the vendor transport waited for their charges.",
			waitBuckets, "vendor", "model"),
		latency: histogram(c, "sluice_vendor_latency_seconds",
			"Time the vendor took to answer calls through the vendor transport: from sending the request to the response's headers (a stream's come before its first token).",
			waitBuckets, "vendor", "model"),
		took: histogram(c, "sluice_vendor_call_seconds",
			"Time calls through the vendor transport that got a response took, from sending the request to the end of the body.",
			waitBuckets, "vendor", "model"),
		remaining: prom.NewGaugeVec(prom.GaugeOpts{Name: "sluice_vendor_remaining_tokens", ConstLabels: c.constLabels,
			Help: "What the vendor reported as remaining at the latest sync of a token dimension, in tokens."}, []string{"dimension"}),
		drift: prom.NewGaugeVec(prom.GaugeOpts{Name: "sluice_vendor_drift_tokens", ConstLabels: c.constLabels,
			Help: "Sluice's balance minus the vendor's reported remaining at the latest sync of a token dimension, in tokens (positive: Sluice believed it had tokens the vendor had counted)."}, []string{"dimension"}),
		models: label.NewDimensions(c.maxModels, modelLabel),
		dims:   label.NewDimensions(c.maxDims, validLabel),
	}
	if err := register(reg, []prom.Collector{m.calls, m.limited, m.wait, m.latency, m.took, m.remaining, m.drift}); err != nil {
		return nil, err
	}
	return m.event, nil
}

// modelLabel returns the model label of a "vendor\x00model" key, or the
// key itself for label.OtherDimension.
func modelLabel(key string) string {
	if _, model, ok := strings.Cut(key, "\x00"); ok {
		key = model
	}
	return validLabel(key)
}

// validLabel returns s with its invalid UTF-8 replaced: a label value
// must be UTF-8, and a model name comes from a request (an Azure
// deployment from its URL's path) that may hold any bytes.
func validLabel(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// event records one finished call.
func (m *vendorMetrics) event(_ context.Context, e transport.Event) {
	vendor := string(e.Vendor)
	model := m.models.Get(vendor + "\x00" + e.Model)
	m.calls.WithLabelValues(vendor, model, statusClass(e.Status), e.Outcome.String()).Inc()
	if e.Status == 429 {
		m.limited.WithLabelValues(vendor, model, limitOf(e.Reaction), kindOf(e)).Inc()
	}
	if e.Outcome != transport.Passed {
		m.wait.WithLabelValues(vendor, model).Observe(e.Waited.Seconds())
	}
	if e.Status != 0 {
		m.latency.WithLabelValues(vendor, model).Observe(e.Latency.Seconds())
		m.took.WithLabelValues(vendor, model).Observe(e.Duration.Seconds())
	}
	if e.Reaction != nil {
		for _, d := range e.Reaction.Drift {
			dim := m.dims.Get(d.Dimension)
			m.remaining.WithLabelValues(dim).Set(float64(d.Reported))
			m.drift.WithLabelValues(dim).Set(float64(d.Tokens()))
		}
	}
}

// statusClass returns "1xx" to "5xx" for an HTTP status, "none" for 0 and
// for a status outside 100..599.
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return noStatus
	}
	return strconv.Itoa(status/100) + "xx"
}

// limitOf names the limit a 429 response named: requests (per minute or
// per day), tokens (total, input or output, per minute or per day), or
// other (concurrency, none named, no response read).
func limitOf(r *vendors.Reaction) string {
	if r == nil {
		return limitOther
	}
	switch r.Classification.Metric {
	case vendors.Requests, vendors.RequestsPerDay:
		return limitRequests
	case vendors.Tokens, vendors.InputTokens, vendors.OutputTokens, vendors.TokensPerDay:
		return limitTokens
	}
	return limitOther
}

// kindOf returns the kind of a failed response (vendors.Kind's name:
// rate_limited, quota_exhausted, ...), read from the event's VendorErr,
// else from its Reaction; other_error when neither says.
func kindOf(e transport.Event) string {
	var ve *vendors.Error
	switch {
	case errors.As(e.VendorErr, &ve):
		return ve.Kind.String()
	case e.Reaction != nil:
		return e.Reaction.Classification.Kind.String()
	}
	return vendors.OtherError.String()
}
