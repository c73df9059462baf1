// Package otel exports a sluice.Client's decisions as OpenTelemetry metrics
// and spans. New creates the instruments and returns the sluice.Observer
// that records them; pass it to the Client with sluice.WithObserver.
//
//	import sluiceotel "github.com/ontopix/sluice/observe/otel"
//
//	obs, err := sluiceotel.New(meterProvider, tracerProvider)
//	if err != nil { ... }
//	client, err := sluice.New(st, sluice.WithObserver(obs))
//
// # Metrics
//
// The instruments match the metrics of package sluice/observe/prometheus,
// named in OpenTelemetry's dotted style with the unit given separately, and
// the same attribute values: sluice.dimension, sluice.outcome
// (granted, retry_in, degraded, error), sluice.result, sluice.cause,
// sluice.op and sluice.kind. An acquisition of several dimensions counts
// once in each instrument with a sluice.dimension attribute.
//
//	sluice.acquisitions              counter    {acquisition} sluice.dimension, sluice.outcome
//	sluice.acquire.duration          histogram  s             sluice.outcome
//	sluice.retry_in                  histogram  s             sluice.dimension
//	sluice.degraded_grants           counter    {grant}       sluice.dimension
//	sluice.wait.duration             histogram  s             sluice.result (granted, timeout, error)
//	sluice.wait.attempts             histogram  {attempt}     sluice.result
//	sluice.settlements               counter    {settlement}  sluice.dimension, sluice.result (ok, late, error)
//	sluice.settle.estimated_tokens   counter    {token}       sluice.dimension
//	sluice.settle.actual_tokens      counter    {token}       sluice.dimension
//	sluice.settle.delta              histogram  {token}       sluice.dimension
//	sluice.settle.clamped            counter    {settlement}  sluice.dimension
//	sluice.penalties                 counter    {penalty}     sluice.dimension, sluice.result (ok, error)
//	sluice.cooldowns                 counter    {cooldown}    sluice.dimension, sluice.result (ok, error)
//	sluice.syncs                     counter    {sync}        sluice.dimension, sluice.result (lowered, unchanged, error)
//	sluice.releases                  counter    {release}     sluice.result (released, unrecorded, expired, error)
//	sluice.lease.held                histogram  s             -
//	sluice.leases_lost               counter    {lease}       sluice.cause (expired, unknown_lease, unavailable, other)
//	sluice.reconcile.runs            counter    {run}         sluice.result (ok, error)
//	sluice.reconcile.duration        histogram  s             -
//	sluice.reconcile.restored        counter    {lease}       sluice.result (reclaimed, already_capped, cleaned, orphan)
//	sluice.store.errors              counter    {error}       sluice.op, sluice.kind
//	sluice.buckets.recreated         counter    {bucket}      sluice.dimension, sluice.op
//
// At most WithMaxDimensions distinct dimensions (100 by default) are named;
// the others are recorded as sluice.dimension="_other".
//
// # Spans
//
// Each acquisition, wait, settlement and reconcile batch becomes one span,
// a child of the span in the hook's context: sluice.acquire, sluice.wait,
// sluice.settle and sluice.reconcile. The hooks run after the fact, so a
// span starts at the time the event's duration says it began and ends when
// the hook runs; a settlement carries no duration and gets a span of zero
// length. A span whose event has an error has status Error and records the
// error. A lost lease and a failed store call add an event
// (sluice.lease_lost, sluice.store_error) to the span in the context, if
// any.
package otel

import (
	"fmt"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/observe/internal/label"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/ontopix/sluice/observe/otel"

// Option configures New.
type Option func(*config)

type config struct {
	maxDims int
	noSpans bool
}

// WithMaxDimensions sets how many distinct dimensions are named in
// attributes (default 100, at least 1); the others are recorded as
// "_other".
func WithMaxDimensions(n int) Option { return func(c *config) { c.maxDims = n } }

// WithoutSpans records the metrics only: no span is started and the
// TracerProvider is not used. A no-op TracerProvider
// (go.opentelemetry.io/otel/trace/noop) has the same effect.
func WithoutSpans() Option { return func(c *config) { c.noSpans = true } }

// New creates the instruments on mp's meter and returns the Observer that
// records them and starts spans on tp's tracer. A nil provider means the
// global one (otel.GetMeterProvider, otel.GetTracerProvider). It fails when
// an option is invalid (an error matching sluice.ErrInvalid) or an
// instrument cannot be created.
func New(mp metric.MeterProvider, tp trace.TracerProvider, opts ...Option) (*sluice.Observer, error) {
	c := config{maxDims: label.DefaultMaxDimensions}
	for _, o := range opts {
		o(&c)
	}
	if c.maxDims < 1 {
		return nil, fmt.Errorf("otel: %w", &sluice.FieldError{Field: "max_dimensions", Value: c.maxDims, Reason: "must be at least 1"})
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil && !c.noSpans {
		tp = otel.GetTracerProvider()
	}
	in, err := newInstruments(mp.Meter(ScopeName), c)
	if err != nil {
		return nil, fmt.Errorf("otel: creating sluice instruments: %w", err)
	}
	a := &adapter{in: in}
	if _, noop := tp.(tracenoop.TracerProvider); !c.noSpans && !noop {
		a.tracer = tp.Tracer(ScopeName)
	}
	return a.observer(), nil
}
