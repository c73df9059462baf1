// Package prometheus exports a sluice.Client's decisions as Prometheus
// metrics. New registers the metrics and returns the sluice.Observer that
// feeds them; pass it to the Client with sluice.WithObserver.
//
//	import sluiceprom "github.com/ontopix/sluice/observe/prometheus"
//
//	obs, err := sluiceprom.New(prometheus.DefaultRegisterer)
//	if err != nil { ... }
//	client, err := sluice.New(st, sluice.WithObserver(obs))
//
// # Metrics
//
// Every name carries its unit. An acquisition of several dimensions counts
// once in each metric labelled by dimension and once in the others.
//
//	sluice_acquire_total                  counter    dimension, outcome  acquisitions (granted, retry_in, degraded, error)
//	sluice_acquire_duration_seconds       histogram  outcome             time to decide, store round trips included
//	sluice_retry_in_seconds               histogram  dimension           the wait of each short dimension
//	sluice_degraded_grants_total          counter    dimension           grants made without the store (fail open)
//	sluice_wait_seconds                   histogram  result              time Wait, WithSlot or Slot waited (granted, timeout, error)
//	sluice_wait_attempts                  histogram  result              acquisitions one wait made
//	sluice_settlements_total              counter    dimension, result   settlements (ok, late, error)
//	sluice_settle_estimated_tokens_total  counter    dimension           estimates settled, in tokens
//	sluice_settle_actual_tokens_total     counter    dimension           actual usage settled, in tokens
//	sluice_settle_delta_tokens            histogram  dimension           actual minus estimate per settlement, in tokens
//	sluice_settle_clamped_total           counter    dimension           settlements the debt floor or the capacity limited
//	sluice_penalties_total                counter    dimension, result   Penalize calls (ok, error)
//	sluice_cooldowns_total                counter    dimension, result   Cooldown and CooldownFor calls (ok, error)
//	sluice_syncs_total                    counter    dimension, result   Sync calls (lowered, unchanged, error)
//	sluice_sync_drift_tokens              gauge      dimension           balance minus the vendor's remaining at the latest sync
//	sluice_sync_drift_ahead_tokens_total  counter    dimension           positive drifts summed: what the bucket held that the vendor had counted
//	sluice_releases_total                 counter    result              releases (released, unrecorded, expired, error)
//	sluice_lease_held_seconds             histogram  -                   how long released leases were held
//	sluice_leases_lost_total              counter    cause               leases a SlotHandle gave up (expired, unknown_lease, unavailable, other)
//	sluice_reconcile_runs_total           counter    result              reconcile batches (ok, error)
//	sluice_reconcile_duration_seconds     histogram  -                   time a batch took
//	sluice_reconcile_restored_total       counter    result              expired leases processed (reclaimed, already_capped, cleaned, orphan)
//	sluice_store_errors_total             counter    op, kind            failed store calls, by operation and kind (unavailable, contention, closed, invalid, other)
//	sluice_buckets_recreated_total        counter    dimension           declared buckets this client re-created after the store lost them (sluice.WithBuckets)
//
// Settled tokens are counted only for settlements that succeeded. The four
// results of sluice_reconcile_restored_total are disjoint and add up to the
// leases processed: a concurrent lease whose slots went back is
// "reclaimed" (or "already_capped" when the capacity guard limited the
// return), a requests or tokens lease whose record was deleted is
// "cleaned", a record whose bucket was gone is an "orphan".
//
// # Cardinality
//
// Dimension names come from the operator's bucket configuration, but an
// acquisition that fails on an unknown dimension carries whatever name the
// caller passed. The adapter therefore labels at most WithMaxDimensions
// distinct dimensions (100 by default) by name and counts the others under
// dimension="_other". The op label is one of the store operations sluice
// names, or "other"; every other label has a fixed set of values. The
// series of a dimension are created, at zero, the first time it is seen.
package prometheus

import (
	"errors"
	"fmt"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/observe/internal/label"
	prom "github.com/prometheus/client_golang/prometheus"
)

// Option configures New.
type Option func(*config)

type config struct {
	maxDims     int
	constLabels prom.Labels
}

// WithMaxDimensions sets how many distinct dimensions are labelled by name
// (default 100, at least 1); the others are counted as "_other".
func WithMaxDimensions(n int) Option { return func(c *config) { c.maxDims = n } }

// WithConstLabels adds labels with fixed values to every metric, e.g. the
// service's name when several share a registry.
func WithConstLabels(l prom.Labels) Option { return func(c *config) { c.constLabels = l } }

// New registers the metrics on reg and returns the Observer that updates
// them. It fails when an option is invalid (an error matching
// sluice.ErrInvalid) or when reg refuses a metric, e.g. because New already
// registered on it; then nothing stays registered.
func New(reg prom.Registerer, opts ...Option) (*sluice.Observer, error) {
	c := config{maxDims: label.DefaultMaxDimensions}
	for _, o := range opts {
		o(&c)
	}
	if c.maxDims < 1 {
		return nil, fmt.Errorf("prometheus: %w", &sluice.FieldError{Field: "max_dimensions", Value: c.maxDims, Reason: "must be at least 1"})
	}
	if reg == nil {
		return nil, fmt.Errorf("prometheus: %w", &sluice.FieldError{Field: "registerer", Value: "nil", Reason: "must be set (prometheus.DefaultRegisterer, or a registry of your own)"})
	}
	m := newMetrics(c)
	if err := register(reg, m.collectors()); err != nil {
		return nil, err
	}
	return m.observer(), nil
}

// register registers every collector, or none: on a failure it unregisters
// those it registered.
func register(reg prom.Registerer, cs []prom.Collector) error {
	for i, col := range cs {
		if err := reg.Register(col); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			var are prom.AlreadyRegisteredError
			if errors.As(err, &are) {
				return fmt.Errorf("prometheus: sluice metrics already registered: %w", err)
			}
			return fmt.Errorf("prometheus: registering sluice metrics: %w", err)
		}
	}
	return nil
}
