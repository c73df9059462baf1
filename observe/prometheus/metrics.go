package prometheus

import (
	"context"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/observe/internal/label"
	prom "github.com/prometheus/client_golang/prometheus"
)

// Histogram buckets, in the metric's unit.
var (
	durationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	retryInBuckets  = []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	waitBuckets     = []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	heldBuckets     = []float64{.01, .1, .5, 1, 5, 10, 30, 60, 120, 300, 600}
	attemptBuckets  = []float64{1, 2, 3, 5, 10, 20, 50}
	deltaBuckets    = []float64{-100000, -10000, -1000, -100, -10, -1, 0, 1, 10, 100, 1000, 10000, 100000}
)

// metrics holds the registered vectors and the series resolved ahead of
// time, so that a hook only increments.
type metrics struct {
	acquire, degraded, settlements, estimated, actual, clamped, penalties *prom.CounterVec
	cooldowns, syncs, driftAhead                                          *prom.CounterVec
	drift                                                                 *prom.GaugeVec
	retryIn, delta                                                        *prom.HistogramVec
	acquireDur, wait, attempts, dimWait                                   *prom.HistogramVec
	releases, lost, runs, restored, storeErrs                             *prom.CounterVec
	recreated                                                             *prom.CounterVec
	held, reconcileDur                                                    prom.Histogram

	dims        *label.Dimensions[*dimSeries]
	acquireDurs [len(label.Outcomes)]prom.Observer
	waits       [len(label.WaitResults)]prom.Observer
	attemptsBy  [len(label.WaitResults)]prom.Observer
	releasesBy  [len(label.ReleaseResults)]prom.Counter
	lostBy      [len(label.LostCauses)]prom.Counter
	runsBy      [len(label.RunResults)]prom.Counter
	restoredBy  [len(label.ReconcileResults)]prom.Counter
}

// dimSeries are the series of one dimension.
type dimSeries struct {
	acquire           [len(label.Outcomes)]prom.Counter
	degraded          prom.Counter
	retryIn           prom.Observer
	settlements       [len(label.SettleResults)]prom.Counter
	estimated, actual prom.Counter
	delta             prom.Observer
	clamped           prom.Counter
	penalties         [len(label.PenaltyResults)]prom.Counter
	cooldowns         [len(label.CooldownResults)]prom.Counter
	syncs             [len(label.SyncResults)]prom.Counter
	drift             prom.Gauge
	driftAhead        prom.Counter
	waits             [len(label.WaitResults)]prom.Observer
}

func counter(c config, name, help string, labels ...string) *prom.CounterVec {
	return prom.NewCounterVec(prom.CounterOpts{Name: name, Help: help, ConstLabels: c.constLabels}, labels)
}

func histogram(c config, name, help string, buckets []float64, labels ...string) *prom.HistogramVec {
	return prom.NewHistogramVec(prom.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: c.constLabels}, labels)
}

func newMetrics(c config) *metrics {
	m := &metrics{
		acquire:    counter(c, "sluice_acquire_total", "Acquisition decisions, per dimension asked for, by outcome.", "dimension", "outcome"),
		acquireDur: histogram(c, "sluice_acquire_duration_seconds", "Time an acquisition decision took, store round trips included.", durationBuckets, "outcome"),
		retryIn:    histogram(c, "sluice_retry_in_seconds", "Wait a denied acquisition was asked to make, per dimension asked for.", retryInBuckets, "dimension"),
		degraded:   counter(c, "sluice_degraded_grants_total", "Grants made without the store (fail open), per dimension asked for.", "dimension"),
		wait:       histogram(c, "sluice_wait_seconds", "Time Wait, WithSlot or Slot waited, by result.", waitBuckets, "result"),
		dimWait: histogram(c, "sluice_dimension_wait_seconds", "Time Wait, WithSlot or Slot waited, per dimension asked for, by result.",
			waitBuckets, "dimension", "result"),
		attempts:    histogram(c, "sluice_wait_attempts", "Acquisitions one wait made, by result.", attemptBuckets, "result"),
		settlements: counter(c, "sluice_settlements_total", "Settlements of a lease's estimate, by result.", "dimension", "result"),
		estimated:   counter(c, "sluice_settle_estimated_tokens_total", "Estimates settled successfully, in tokens.", "dimension"),
		actual:      counter(c, "sluice_settle_actual_tokens_total", "Actual usage settled successfully, in tokens.", "dimension"),
		delta:       histogram(c, "sluice_settle_delta_tokens", "Actual minus estimate per successful settlement, in tokens.", deltaBuckets, "dimension"),
		clamped:     counter(c, "sluice_settle_clamped_total", "Settlements whose change the debt floor or the capacity limited.", "dimension"),
		penalties:   counter(c, "sluice_penalties_total", "Penalize calls, by result.", "dimension", "result"),
		cooldowns:   counter(c, "sluice_cooldowns_total", "Cooldown calls, by result.", "dimension", "result"),
		syncs:       counter(c, "sluice_syncs_total", "Sync calls, by result: lowered the balance, left it unchanged, or failed.", "dimension", "result"),
		drift: prom.NewGaugeVec(prom.GaugeOpts{Name: "sluice_sync_drift_tokens", ConstLabels: c.constLabels,
			Help: "Balance minus the vendor's reported remaining at the latest successful sync, in the dimension's units (positive: the bucket held what the vendor had already counted)."}, []string{"dimension"}),
		driftAhead:   counter(c, "sluice_sync_drift_ahead_tokens_total", "Sum of the positive drifts found by successful syncs, in the dimension's units.", "dimension"),
		releases:     counter(c, "sluice_releases_total", "Lease releases, by result.", "result"),
		lost:         counter(c, "sluice_leases_lost_total", "Leases a SlotHandle gave up, by cause.", "cause"),
		runs:         counter(c, "sluice_reconcile_runs_total", "Reconcile batches, by result.", "result"),
		restored:     counter(c, "sluice_reconcile_restored_total", "Expired leases a reconcile processed, by what became of them.", "result"),
		storeErrs:    counter(c, "sluice_store_errors_total", "Failed store calls, by operation and kind.", "op", "kind"),
		recreated:    counter(c, "sluice_buckets_recreated_total", "Declared buckets this client re-created after the store lost them.", "dimension"),
		held:         prom.NewHistogram(prom.HistogramOpts{Name: "sluice_lease_held_seconds", Help: "How long released leases were held.", Buckets: heldBuckets, ConstLabels: c.constLabels}),
		reconcileDur: prom.NewHistogram(prom.HistogramOpts{Name: "sluice_reconcile_duration_seconds", Help: "Time a reconcile batch took.", Buckets: durationBuckets, ConstLabels: c.constLabels}),
	}
	m.dims = label.NewDimensions(c.maxDims, m.dimSeries)
	for i, o := range label.Outcomes {
		m.acquireDurs[i] = m.acquireDur.WithLabelValues(o)
	}
	for i, r := range label.WaitResults {
		m.waits[i] = m.wait.WithLabelValues(r)
		m.attemptsBy[i] = m.attempts.WithLabelValues(r)
	}
	for i, r := range label.ReleaseResults {
		m.releasesBy[i] = m.releases.WithLabelValues(r)
	}
	for i, r := range label.LostCauses {
		m.lostBy[i] = m.lost.WithLabelValues(r)
	}
	for i, r := range label.RunResults {
		m.runsBy[i] = m.runs.WithLabelValues(r)
	}
	for i, r := range label.ReconcileResults {
		m.restoredBy[i] = m.restored.WithLabelValues(r)
	}
	return m
}

// dimSeries creates the series of one dimension.
func (m *metrics) dimSeries(dim string) *dimSeries {
	s := &dimSeries{
		degraded:   m.degraded.WithLabelValues(dim),
		retryIn:    m.retryIn.WithLabelValues(dim),
		estimated:  m.estimated.WithLabelValues(dim),
		actual:     m.actual.WithLabelValues(dim),
		delta:      m.delta.WithLabelValues(dim),
		clamped:    m.clamped.WithLabelValues(dim),
		drift:      m.drift.WithLabelValues(dim),
		driftAhead: m.driftAhead.WithLabelValues(dim),
	}
	for i, o := range label.Outcomes {
		s.acquire[i] = m.acquire.WithLabelValues(dim, o)
	}
	for i, r := range label.SettleResults {
		s.settlements[i] = m.settlements.WithLabelValues(dim, r)
	}
	for i, r := range label.PenaltyResults {
		s.penalties[i] = m.penalties.WithLabelValues(dim, r)
	}
	for i, r := range label.CooldownResults {
		s.cooldowns[i] = m.cooldowns.WithLabelValues(dim, r)
	}
	for i, r := range label.SyncResults {
		s.syncs[i] = m.syncs.WithLabelValues(dim, r)
	}
	for i, r := range label.WaitResults {
		s.waits[i] = m.dimWait.WithLabelValues(dim, r)
	}
	return s
}

func (m *metrics) collectors() []prom.Collector {
	return []prom.Collector{
		m.acquire, m.acquireDur, m.retryIn, m.degraded, m.wait, m.dimWait, m.attempts,
		m.settlements, m.estimated, m.actual, m.delta, m.clamped, m.penalties, m.cooldowns, m.syncs, m.drift, m.driftAhead,
		m.releases, m.held, m.lost, m.runs, m.reconcileDur, m.restored, m.storeErrs, m.recreated,
	}
}

func (m *metrics) observer() *sluice.Observer {
	return &sluice.Observer{
		Acquired:   m.acquired,
		Waited:     m.waited,
		Settled:    m.settled,
		Penalized:  m.penalized,
		Cooled:     m.cooled,
		Synced:     m.synced,
		Released:   m.released,
		LeaseLost:  m.leaseLost,
		Reconciled: m.reconciled,
		StoreError: m.storeError,
		Recreated:  m.recreatedBucket,
	}
}

// recreatedBucket counts a re-created bucket. Only declared buckets are
// re-created, so the dimension label is bounded by the limits file.
func (m *metrics) recreatedBucket(_ context.Context, e sluice.RecreateEvent) {
	m.recreated.WithLabelValues(e.Dimension).Inc()
}

func (m *metrics) acquired(_ context.Context, e sluice.AcquireEvent) {
	o := label.Acquire(&e)
	if !e.HandedOver { // a hand-over made no store call
		m.acquireDurs[o].Observe(e.Duration.Seconds())
	}
	for i, r := range e.Dimensions {
		s := m.dims.Get(r.Dimension)
		s.acquire[o].Inc()
		switch label.Outcomes[o] {
		case label.RetryIn:
			if w, short := label.DimensionWait(&e, i); short {
				s.retryIn.Observe(w.Seconds())
			}
		case label.Degraded:
			s.degraded.Inc()
		}
	}
}

// waited records a wait once in sluice_wait_seconds and once per
// dimension asked for in sluice_dimension_wait_seconds.
func (m *metrics) waited(_ context.Context, e sluice.WaitEvent) {
	r := label.Wait(&e)
	w := e.Waited.Seconds()
	m.waits[r].Observe(w)
	m.attemptsBy[r].Observe(float64(e.Attempts))
	for _, d := range e.Dimensions {
		m.dims.Get(d.Dimension).waits[r].Observe(w)
	}
}

func (m *metrics) settled(_ context.Context, e sluice.SettleEvent) {
	s := m.dims.Get(e.Dimension)
	s.settlements[label.Settle(&e)].Inc()
	if e.Err != nil {
		return
	}
	s.estimated.Add(float64(max(e.Estimate, 0)))
	s.actual.Add(float64(max(e.Actual, 0)))
	s.delta.Observe(float64(e.Actual - e.Estimate))
	if label.Clamped(&e) {
		s.clamped.Inc()
	}
}

func (m *metrics) penalized(_ context.Context, e sluice.PenaltyEvent) {
	m.dims.Get(e.Dimension).penalties[label.Penalty(&e)].Inc()
}

func (m *metrics) cooled(_ context.Context, e sluice.CooldownEvent) {
	m.dims.Get(e.Dimension).cooldowns[label.Cooldown(&e)].Inc()
}

// synced counts a sync and, when it succeeded, records the drift between
// the balance and the vendor's remaining.
func (m *metrics) synced(_ context.Context, e sluice.SyncEvent) {
	s := m.dims.Get(e.Dimension)
	s.syncs[label.Sync(&e)].Inc()
	if e.Err != nil {
		return
	}
	d := float64(e.Before)/1000 - float64(e.Remaining)
	s.drift.Set(d)
	if d > 0 {
		s.driftAhead.Add(d)
	}
}

func (m *metrics) released(_ context.Context, e sluice.ReleaseEvent) {
	r := label.Release(&e)
	m.releasesBy[r].Inc()
	if e.Err == nil {
		m.held.Observe(e.Held.Seconds())
	}
}

func (m *metrics) leaseLost(_ context.Context, e sluice.LeaseLostEvent) {
	m.lostBy[label.LeaseLost(&e)].Inc()
}

func (m *metrics) reconciled(_ context.Context, e sluice.ReconcileEvent) {
	m.runsBy[label.Run(e.Err)].Inc()
	m.reconcileDur.Observe(e.Duration.Seconds())
	for i, n := range label.Reconcile(&e) {
		if n > 0 {
			m.restoredBy[i].Add(float64(n))
		}
	}
}

func (m *metrics) storeError(_ context.Context, e sluice.StoreErrorEvent) {
	m.storeErrs.WithLabelValues(label.Op(e.Op), e.Kind.String()).Inc()
}
