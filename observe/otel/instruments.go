package otel

import (
	"errors"

	"github.com/ontopix/sluice/observe/internal/label"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Attribute keys.
const (
	keyDimension  = attribute.Key("sluice.dimension")
	keyDimensions = attribute.Key("sluice.dimensions")
	keyOutcome    = attribute.Key("sluice.outcome")
	keyResult     = attribute.Key("sluice.result")
	keyCause      = attribute.Key("sluice.cause")
	keyOp         = attribute.Key("sluice.op")
	keyKind       = attribute.Key("sluice.kind")
)

// Histogram bucket boundaries, in the instrument's unit.
var (
	durationBounds = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	retryInBounds  = []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	waitBounds     = []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	heldBounds     = []float64{.01, .1, .5, 1, 5, 10, 30, 60, 120, 300, 600}
	attemptBounds  = []float64{1, 2, 3, 5, 10, 20, 50}
	deltaBounds    = []float64{-100000, -10000, -1000, -100, -10, -1, 0, 1, 10, 100, 1000, 10000, 100000}
)

// instruments holds the instruments and the attribute options resolved
// ahead of time, so that a hook records without building attributes.
type instruments struct {
	acquire, degraded, settlements, estimated, actual, clamped, penalties metric.Int64Counter
	cooldowns, syncs                                                      metric.Int64Counter
	releases, lost, runs, restored, storeErrs                             metric.Int64Counter
	recreated                                                             metric.Int64Counter
	acquireDur, retryIn, wait, held, reconcileDur                         metric.Float64Histogram
	attempts, delta                                                       metric.Int64Histogram

	dims       *label.Dimensions[*dimAttrs]
	outcomes   [len(label.Outcomes)][]metric.RecordOption
	waits      [len(label.WaitResults)][]metric.RecordOption
	releasesBy [len(label.ReleaseResults)][]metric.AddOption
	lostBy     [len(label.LostCauses)][]metric.AddOption
	runsBy     [len(label.RunResults)][]metric.AddOption
	restoredBy [len(label.ReconcileResults)][]metric.AddOption
}

// dimAttrs are the attribute options of one dimension.
type dimAttrs struct {
	add      []metric.AddOption
	record   []metric.RecordOption
	acquire  [len(label.Outcomes)][]metric.AddOption
	settle   [len(label.SettleResults)][]metric.AddOption
	penalize [len(label.PenaltyResults)][]metric.AddOption
	cooldown [len(label.CooldownResults)][]metric.AddOption
	sync     [len(label.SyncResults)][]metric.AddOption
}

func addOpt(kv ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

func recordOpt(kv ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

// builder creates instruments and collects their errors.
type builder struct {
	m   metric.Meter
	err error
}

func (b *builder) counter(name, unit, desc string) metric.Int64Counter {
	c, err := b.m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.err = errors.Join(b.err, err)
	return c
}

func (b *builder) seconds(name, desc string, bounds []float64) metric.Float64Histogram {
	h, err := b.m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
	b.err = errors.Join(b.err, err)
	return h
}

func (b *builder) histogram(name, unit, desc string, bounds []float64) metric.Int64Histogram {
	h, err := b.m.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
	b.err = errors.Join(b.err, err)
	return h
}

func newInstruments(m metric.Meter, c config) (*instruments, error) {
	b := &builder{m: m}
	in := &instruments{
		acquire:      b.counter("sluice.acquisitions", "{acquisition}", "Acquisition decisions, per dimension asked for, by outcome."),
		acquireDur:   b.seconds("sluice.acquire.duration", "Time an acquisition decision took, store round trips included.", durationBounds),
		retryIn:      b.seconds("sluice.retry_in", "Wait a denied acquisition was asked to make, per dimension asked for.", retryInBounds),
		degraded:     b.counter("sluice.degraded_grants", "{grant}", "Grants made without the store (fail open), per dimension asked for."),
		wait:         b.seconds("sluice.wait.duration", "Time Wait, WithSlot or Slot waited, by result.", waitBounds),
		attempts:     b.histogram("sluice.wait.attempts", "{attempt}", "Acquisitions one wait made, by result.", attemptBounds),
		settlements:  b.counter("sluice.settlements", "{settlement}", "Settlements of a lease's estimate, by result."),
		estimated:    b.counter("sluice.settle.estimated_tokens", "{token}", "Estimates settled successfully."),
		actual:       b.counter("sluice.settle.actual_tokens", "{token}", "Actual usage settled successfully."),
		delta:        b.histogram("sluice.settle.delta", "{token}", "Actual minus estimate per successful settlement.", deltaBounds),
		clamped:      b.counter("sluice.settle.clamped", "{settlement}", "Settlements whose change the debt floor or the capacity limited."),
		penalties:    b.counter("sluice.penalties", "{penalty}", "Penalize calls, by result."),
		cooldowns:    b.counter("sluice.cooldowns", "{cooldown}", "Cooldown calls, by result."),
		syncs:        b.counter("sluice.syncs", "{sync}", "Sync calls, by result: lowered the balance, left it unchanged, or failed."),
		releases:     b.counter("sluice.releases", "{release}", "Lease releases, by result."),
		held:         b.seconds("sluice.lease.held", "How long released leases were held.", heldBounds),
		lost:         b.counter("sluice.leases_lost", "{lease}", "Leases a SlotHandle gave up, by cause."),
		runs:         b.counter("sluice.reconcile.runs", "{run}", "Reconcile batches, by result."),
		reconcileDur: b.seconds("sluice.reconcile.duration", "Time a reconcile batch took.", durationBounds),
		restored:     b.counter("sluice.reconcile.restored", "{lease}", "Expired leases a reconcile processed, by what became of them."),
		storeErrs:    b.counter("sluice.store.errors", "{error}", "Failed store calls, by operation and kind."),
		recreated:    b.counter("sluice.buckets.recreated", "{bucket}", "Declared buckets this client re-created after the store lost them."),
	}
	if b.err != nil {
		return nil, b.err
	}
	in.dims = label.NewDimensions(c.maxDims, newDimAttrs)
	for i, o := range label.Outcomes {
		in.outcomes[i] = recordOpt(keyOutcome.String(o))
	}
	for i, r := range label.WaitResults {
		in.waits[i] = recordOpt(keyResult.String(r))
	}
	for i, r := range label.ReleaseResults {
		in.releasesBy[i] = addOpt(keyResult.String(r))
	}
	for i, r := range label.LostCauses {
		in.lostBy[i] = addOpt(keyCause.String(r))
	}
	for i, r := range label.RunResults {
		in.runsBy[i] = addOpt(keyResult.String(r))
	}
	for i, r := range label.ReconcileResults {
		in.restoredBy[i] = addOpt(keyResult.String(r))
	}
	return in, nil
}

// newDimAttrs builds the attribute options of one dimension.
func newDimAttrs(dim string) *dimAttrs {
	d := keyDimension.String(dim)
	a := &dimAttrs{add: addOpt(d), record: recordOpt(d)}
	for i, o := range label.Outcomes {
		a.acquire[i] = addOpt(d, keyOutcome.String(o))
	}
	for i, r := range label.SettleResults {
		a.settle[i] = addOpt(d, keyResult.String(r))
	}
	for i, r := range label.PenaltyResults {
		a.penalize[i] = addOpt(d, keyResult.String(r))
	}
	for i, r := range label.CooldownResults {
		a.cooldown[i] = addOpt(d, keyResult.String(r))
	}
	for i, r := range label.SyncResults {
		a.sync[i] = addOpt(d, keyResult.String(r))
	}
	return a
}
