package otel

import (
	"context"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/observe/internal/label"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// adapter records an Observer's events as instruments and spans.
type adapter struct {
	in     *instruments
	tracer trace.Tracer
}

func (a *adapter) observer() *sluice.Observer {
	return &sluice.Observer{
		Acquired:   a.acquired,
		Waited:     a.waited,
		Settled:    a.settled,
		Penalized:  a.penalized,
		Cooled:     a.cooled,
		Synced:     a.synced,
		Released:   a.released,
		LeaseLost:  a.leaseLost,
		Reconciled: a.reconciled,
		StoreError: a.storeError,
		Recreated:  a.recreated,
	}
}

// start begins the span of an operation that took d and finished at now.
// It returns nil, and records nothing, when spans are off or the span does
// not record; otherwise the caller sets the attributes and calls finish.
func (a *adapter) start(ctx context.Context, name string, now time.Time, d time.Duration) trace.Span {
	if a.tracer == nil {
		return nil
	}
	_, sp := a.tracer.Start(ctx, name, trace.WithTimestamp(now.Add(-d)))
	if !sp.IsRecording() {
		sp.End(trace.WithTimestamp(now))
		return nil
	}
	return sp
}

// finish sets the span's status from err and ends it at now.
func finish(sp trace.Span, now time.Time, err error) {
	if err != nil {
		sp.RecordError(err, trace.WithTimestamp(now))
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End(trace.WithTimestamp(now))
}

// requestAttrs describes the dimensions and costs of a request.
func requestAttrs(reqs []sluice.Request) []attribute.KeyValue {
	dims := make([]string, len(reqs))
	costs := make([]int64, len(reqs))
	for i, r := range reqs {
		dims[i], costs[i] = r.Dimension, r.Cost
	}
	return []attribute.KeyValue{keyDimensions.StringSlice(dims), attribute.Int64Slice("sluice.costs", costs)}
}

func (a *adapter) acquired(ctx context.Context, e sluice.AcquireEvent) {
	in, o := a.in, label.Acquire(&e)
	if !e.HandedOver { // a hand-over made no store call
		in.acquireDur.Record(ctx, e.Duration.Seconds(), in.outcomes[o]...)
	}
	for i, r := range e.Dimensions {
		d := in.dims.Get(r.Dimension)
		in.acquire.Add(ctx, 1, d.acquire[o]...)
		switch label.Outcomes[o] {
		case label.RetryIn:
			if w, short := label.DimensionWait(&e, i); short {
				in.retryIn.Record(ctx, w.Seconds(), d.record...)
			}
		case label.Degraded:
			in.degraded.Add(ctx, 1, d.add...)
		}
	}
	now := time.Now()
	if sp := a.start(ctx, "sluice.acquire", now, e.Duration); sp != nil {
		sp.SetAttributes(requestAttrs(e.Dimensions)...)
		sp.SetAttributes(keyOutcome.String(label.Outcomes[o]))
		if label.Outcomes[o] == label.RetryIn {
			sp.SetAttributes(attribute.Float64("sluice.retry_in_seconds", e.RetryIn.Seconds()))
		}
		finish(sp, now, e.Err)
	}
}

func (a *adapter) waited(ctx context.Context, e sluice.WaitEvent) {
	in, r := a.in, label.Wait(&e)
	in.wait.Record(ctx, e.Waited.Seconds(), in.waits[r]...)
	in.attempts.Record(ctx, int64(e.Attempts), in.waits[r]...)
	now := time.Now()
	if sp := a.start(ctx, "sluice.wait", now, e.Waited); sp != nil {
		sp.SetAttributes(requestAttrs(e.Dimensions)...)
		sp.SetAttributes(keyResult.String(label.WaitResults[r]), attribute.Int("sluice.attempts", e.Attempts))
		finish(sp, now, e.Err)
	}
}

func (a *adapter) settled(ctx context.Context, e sluice.SettleEvent) {
	in, r := a.in, label.Settle(&e)
	d := in.dims.Get(e.Dimension)
	in.settlements.Add(ctx, 1, d.settle[r]...)
	if e.Err == nil {
		in.estimated.Add(ctx, max(e.Estimate, 0), d.add...)
		in.actual.Add(ctx, max(e.Actual, 0), d.add...)
		in.delta.Record(ctx, e.Actual-e.Estimate, d.record...)
		if label.Clamped(&e) {
			in.clamped.Add(ctx, 1, d.add...)
		}
	}
	now := time.Now()
	if sp := a.start(ctx, "sluice.settle", now, 0); sp != nil {
		sp.SetAttributes(
			keyDimension.String(e.Dimension),
			keyResult.String(label.SettleResults[r]),
			attribute.Int64("sluice.estimate_tokens", e.Estimate),
			attribute.Int64("sluice.actual_tokens", e.Actual),
			attribute.Int64("sluice.applied_millitokens", e.Applied),
		)
		finish(sp, now, e.Err)
	}
}

func (a *adapter) penalized(ctx context.Context, e sluice.PenaltyEvent) {
	a.in.penalties.Add(ctx, 1, a.in.dims.Get(e.Dimension).penalize[label.Penalty(&e)]...)
}

func (a *adapter) cooled(ctx context.Context, e sluice.CooldownEvent) {
	a.in.cooldowns.Add(ctx, 1, a.in.dims.Get(e.Dimension).cooldown[label.Cooldown(&e)]...)
}

func (a *adapter) synced(ctx context.Context, e sluice.SyncEvent) {
	a.in.syncs.Add(ctx, 1, a.in.dims.Get(e.Dimension).sync[label.Sync(&e)]...)
}

func (a *adapter) released(ctx context.Context, e sluice.ReleaseEvent) {
	in := a.in
	in.releases.Add(ctx, 1, in.releasesBy[label.Release(&e)]...)
	if e.Err == nil {
		in.held.Record(ctx, e.Held.Seconds())
	}
}

func (a *adapter) leaseLost(ctx context.Context, e sluice.LeaseLostEvent) {
	c := label.LeaseLost(&e)
	a.in.lost.Add(ctx, 1, a.in.lostBy[c]...)
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		kv := []attribute.KeyValue{attribute.String("sluice.lease", e.Lease), keyCause.String(label.LostCauses[c])}
		if e.Cause != nil {
			kv = append(kv, attribute.String("sluice.error", e.Cause.Error()))
		}
		sp.AddEvent("sluice.lease_lost", trace.WithAttributes(kv...))
	}
}

func (a *adapter) reconciled(ctx context.Context, e sluice.ReconcileEvent) {
	in, r := a.in, label.Run(e.Err)
	in.runs.Add(ctx, 1, in.runsBy[r]...)
	in.reconcileDur.Record(ctx, e.Duration.Seconds())
	for i, n := range label.Reconcile(&e) {
		if n > 0 {
			in.restored.Add(ctx, int64(n), in.restoredBy[i]...)
		}
	}
	now := time.Now()
	if sp := a.start(ctx, "sluice.reconcile", now, e.Duration); sp != nil {
		sp.SetAttributes(
			keyResult.String(label.RunResults[r]),
			attribute.Int("sluice.restored", e.Restored),
			attribute.Int("sluice.reclaimed", e.Reclaimed),
			attribute.Int("sluice.already_capped", e.AlreadyCapped),
			attribute.Int("sluice.orphans", e.Orphans),
		)
		finish(sp, now, e.Err)
	}
}

func (a *adapter) storeError(ctx context.Context, e sluice.StoreErrorEvent) {
	op, kind := keyOp.String(label.Op(e.Op)), keyKind.String(e.Kind.String())
	a.in.storeErrs.Add(ctx, 1, metric.WithAttributes(op, kind))
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		kv := []attribute.KeyValue{op, kind}
		if e.Err != nil {
			kv = append(kv, attribute.String("sluice.error", e.Err.Error()))
		}
		sp.AddEvent("sluice.store_error", trace.WithAttributes(kv...))
	}
}

// recreated counts a re-created bucket, by dimension: only declared
// buckets are re-created, so the attribute is bounded by the limits file.
func (a *adapter) recreated(ctx context.Context, e sluice.RecreateEvent) {
	a.in.recreated.Add(ctx, 1, metric.WithAttributes(keyDimension.String(e.Dimension), keyOp.String(label.Op(e.Op))))
}
