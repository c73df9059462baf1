// Package prometheus exports a sluice.Client's decisions, its buckets'
// state and a vendor transport's calls as Prometheus metrics.
//
// New registers the decision metrics and returns the sluice.Observer that
// feeds them; pass it to the Client with sluice.WithObserver.
// NewStateCollector returns a collector that reads the Client's buckets
// when scraped (balance, fill, debt, the line in time, cooldown, leases).
// NewTransportEvents registers the vendor-side metrics and returns the
// transport.EventFunc that feeds them; pass it to transport.New with
// transport.WithEvents.
//
//	import sluiceprom "github.com/ontopix/sluice/observe/prometheus"
//
//	obs, err := sluiceprom.New(prometheus.DefaultRegisterer)
//	if err != nil { ... }
//	client, err := sluice.New(st, sluice.WithObserver(obs))
//	if err != nil { ... }
//	state, err := sluiceprom.NewStateCollector(client)
//	if err != nil { ... }
//	prometheus.MustRegister(state)
//	events, err := sluiceprom.NewTransportEvents(prometheus.DefaultRegisterer)
//	if err != nil { ... }
//	rt, err := transport.New(client, profiles, transport.WithEvents(events))
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
//	sluice_dimension_wait_seconds         histogram  dimension, result   the same waits, once per dimension asked for
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
// NewStateCollector's gauges, read when scraped (at most once per
// WithStateCacheFor period):
//
//	sluice_bucket_tokens                  gauge      dimension           balance in the bucket's units; negative while reservations wait in line or debt is owed
//	sluice_bucket_capacity_tokens         gauge      dimension, type     capacity, with the limit type (requests, tokens, concurrent)
//	sluice_bucket_fill_ratio              gauge      dimension           balance over capacity, 0 to 1
//	sluice_bucket_debt_tokens             gauge      dimension           what the bucket owes below zero: reservations in line and settled debt
//	sluice_bucket_queue_seconds           gauge      dimension           time until the balance is back to zero and any cooldown over (requests and tokens buckets)
//	sluice_bucket_waiters                 gauge      dimension           callers waiting in line for slots (concurrent buckets)
//	sluice_bucket_cooldown_seconds        gauge      dimension           time left in the cooldown
//	sluice_bucket_leases                  gauge      dimension           lease records (held, or expired and not yet reconciled)
//	sluice_bucket_expired_leases          gauge      dimension           lease records past their expiry, not yet reconciled
//	sluice_state_buckets                  gauge      -                   buckets the latest read found, exported or not
//	sluice_state_up                       gauge      -                   1 when the latest read succeeded, else 0
//	sluice_state_reads_total              counter    result              reads of the store the collector made (ok, error)
//
// NewTransportEvents's series, one update per call through the Transport:
//
//	sluice_vendor_calls_total             counter    vendor, model, status, outcome  calls by HTTP status class (1xx to 5xx, none) and transport.Outcome
//	sluice_vendor_rate_limits_total       counter    vendor, model, limit, kind      429 responses by the limit named (requests, tokens, other) and vendors.Kind
//	sluice_vendor_wait_seconds            histogram  vendor, model                   time metered calls waited for their charges
//	sluice_vendor_latency_seconds         histogram  vendor, model                   time the vendor took to the response's headers
//	sluice_vendor_call_seconds            histogram  vendor, model                   time from sending a call to the end of its response
//	sluice_vendor_remaining_tokens        gauge      dimension                       the vendor's remaining at the latest sync of a token dimension
//	sluice_vendor_drift_tokens            gauge      dimension                       Sluice's balance minus that remaining (vendors.Drift)
//
// The transport's events carry no duration of the vendor's answer, so no
// latency is exported per model.
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
// names, or "other". The vendor label is a profile's vendor; models are
// labelled by name for at most WithMaxModels (vendor, model) pairs (50 by
// default), the others as model="_other". NewStateCollector exports at most
// WithMaxDimensions buckets and leaves the others out. Every other label
// has a fixed set of values. The Observer's series of a dimension are
// created, at zero, the first time it is seen; the vendor series when a
// call first has their label values.
package prometheus

import (
	"errors"
	"fmt"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/observe/internal/label"
	prom "github.com/prometheus/client_golang/prometheus"
)

// Option configures New.
type Option func(*config)

type config struct {
	maxDims     int
	maxModels   int
	constLabels prom.Labels
	// The state collector's: see NewStateCollector.
	stateTimeout time.Duration
	stateCache   time.Duration
	stateDims    []string
}

// Defaults of the options.
const (
	// DefaultMaxModels is how many distinct (vendor, model) pairs the
	// vendor metrics label by name unless WithMaxModels says otherwise.
	DefaultMaxModels = 50
	// DefaultStateTimeout bounds the store reads of one refresh of a
	// StateCollector unless WithStateTimeout says otherwise.
	DefaultStateTimeout = 2 * time.Second
	// DefaultStateCacheFor is how long a StateCollector answers scrapes
	// from its last read unless WithStateCacheFor says otherwise.
	DefaultStateCacheFor = 5 * time.Second
)

func newConfig(opts []Option) (config, error) {
	c := config{maxDims: label.DefaultMaxDimensions, maxModels: DefaultMaxModels,
		stateTimeout: DefaultStateTimeout, stateCache: DefaultStateCacheFor}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case c.maxDims < 1:
		return c, fmt.Errorf("prometheus: %w", &sluice.FieldError{Field: "max_dimensions", Value: c.maxDims, Reason: "must be at least 1"})
	case c.maxModels < 1:
		return c, fmt.Errorf("prometheus: %w", &sluice.FieldError{Field: "max_models", Value: c.maxModels, Reason: "must be at least 1"})
	case c.stateTimeout <= 0:
		return c, fmt.Errorf("prometheus: %w", &sluice.FieldError{Field: "state_timeout", Value: c.stateTimeout, Reason: "must be positive"})
	case c.stateCache < 0:
		return c, fmt.Errorf("prometheus: %w", &sluice.FieldError{Field: "state_cache_for", Value: c.stateCache, Reason: "must not be negative"})
	}
	seen := map[string]bool{}
	for _, d := range c.stateDims {
		switch {
		case d == "":
			return c, fmt.Errorf("prometheus: %w", &sluice.FieldError{Field: "state_dimensions", Value: d, Reason: "must not hold an empty name"})
		case seen[d]:
			return c, fmt.Errorf("prometheus: %w", &sluice.FieldError{Field: "state_dimensions", Value: d, Reason: "names a dimension twice"})
		}
		seen[d] = true
	}
	return c, nil
}

// WithMaxDimensions sets how many distinct dimensions are labelled by name
// (default 100, at least 1); the others are counted as "_other" (New,
// NewTransportEvents) or left out (NewStateCollector, whose
// sluice_state_buckets still counts them).
func WithMaxDimensions(n int) Option { return func(c *config) { c.maxDims = n } }

// WithMaxModels sets how many distinct (vendor, model) pairs the vendor
// metrics of NewTransportEvents label by name (default DefaultMaxModels,
// at least 1); the calls of the others are counted under model="_other".
// Only NewTransportEvents uses it; every constructor rejects an invalid
// value.
func WithMaxModels(n int) Option { return func(c *config) { c.maxModels = n } }

// WithStateTimeout bounds the store reads one refresh of a StateCollector
// makes (default DefaultStateTimeout, positive). Keep it below the
// scrape timeout. Only NewStateCollector uses it; every constructor
// rejects an invalid value.
func WithStateTimeout(d time.Duration) Option { return func(c *config) { c.stateTimeout = d } }

// WithStateCacheFor sets how long a StateCollector answers scrapes from
// its last read, failed or not, before it reads the store again (default
// DefaultStateCacheFor; 0 reads on every scrape). However many scrapers
// there are, the store is read at most once per period. Only
// NewStateCollector uses it; every constructor rejects an invalid value.
func WithStateCacheFor(d time.Duration) Option { return func(c *config) { c.stateCache = d } }

// WithStateDimensions makes a StateCollector read only the named
// buckets (with Client.Peek, in the order given, the first
// WithMaxDimensions of them) rather than every bucket of the store
// (Client.Buckets). A name the store does not hold fails the read. Only
// NewStateCollector uses it; every constructor rejects an invalid value.
func WithStateDimensions(names ...string) Option {
	return func(c *config) { c.stateDims = append([]string(nil), names...) }
}

// WithConstLabels adds labels with fixed values to every metric, e.g. the
// service's name when several share a registry.
func WithConstLabels(l prom.Labels) Option { return func(c *config) { c.constLabels = l } }

// New registers the metrics on reg and returns the Observer that updates
// them. It fails when an option is invalid (an error matching
// sluice.ErrInvalid) or when reg refuses a metric, e.g. because New already
// registered on it; then nothing stays registered.
func New(reg prom.Registerer, opts ...Option) (*sluice.Observer, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if reg == nil {
		return nil, errNilRegisterer()
	}
	m := newMetrics(c)
	if err := register(reg, m.collectors()); err != nil {
		return nil, err
	}
	return m.observer(), nil
}

func errNilRegisterer() error {
	return fmt.Errorf("prometheus: %w", &sluice.FieldError{Field: "registerer", Value: "nil", Reason: "must be set (prometheus.DefaultRegisterer, or a registry of your own)"})
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
