package otel_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	sluiceotel "github.com/ontopix/sluice/observe/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

type harness struct {
	obs    *sluice.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newHarness(t *testing.T, opts ...sluiceotel.Option) *harness {
	t.Helper()
	h := &harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	obs, err := sluiceotel.New(mp, h.tp, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.obs = obs
	return h
}

// points collects the instruments and indexes their data points as
// name{attributes} (with :count and :sum for histograms).
func (h *harness) points(t *testing.T) map[string]string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	key := func(name string, s attribute.Set) string {
		return name + "{" + s.Encoded(attribute.DefaultEncoder()) + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[key(m.Name, p.Attributes)] = fmt.Sprint(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[key(m.Name, p.Attributes)+":count"] = fmt.Sprint(p.Count)
					got[key(m.Name, p.Attributes)+":sum"] = fmt.Sprint(p.Sum)
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					got[key(m.Name, p.Attributes)+":count"] = fmt.Sprint(p.Count)
					got[key(m.Name, p.Attributes)+":sum"] = fmt.Sprint(p.Sum)
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return got
}

var (
	rpm  = sluice.Request{Dimension: "openai#rpm", Cost: 1}
	tpm  = sluice.Request{Dimension: "openai#tpm", Cost: 500}
	both = []sluice.Request{rpm, tpm}
)

// feed sends one of each kind of event, several for acquisitions.
func feed(ctx context.Context, o *sluice.Observer) {
	o.Acquired(ctx, sluice.AcquireEvent{Dimensions: both, Outcome: sluice.Granted, Duration: 2 * time.Millisecond})
	o.Acquired(ctx, sluice.AcquireEvent{Dimensions: both, Outcome: sluice.Granted, Duration: 3 * time.Millisecond})
	o.Acquired(ctx, sluice.AcquireEvent{Dimensions: both, Outcome: sluice.RetryIn, RetryIn: 1500 * time.Millisecond, Duration: time.Millisecond})
	o.Acquired(ctx, sluice.AcquireEvent{Dimensions: both[:1], Outcome: sluice.Granted, Degraded: true, Duration: 2 * time.Second})
	o.Acquired(ctx, sluice.AcquireEvent{Dimensions: both[1:], Err: sluice.ErrUnavailable, Duration: 2 * time.Second})
	o.Waited(ctx, sluice.WaitEvent{Dimensions: both, Waited: 1500 * time.Millisecond, Attempts: 2, Granted: true})
	o.Waited(ctx, sluice.WaitEvent{Dimensions: both, Waited: 30 * time.Second, Attempts: 7, TimedOut: true, Err: sluice.ErrSlotTimeout})
	o.Settled(ctx, sluice.SettleEvent{Dimension: "openai#tpm", Estimate: 500, Actual: 420, Applied: -80000})
	o.Settled(ctx, sluice.SettleEvent{Dimension: "openai#tpm", Estimate: 500, Actual: 900, Applied: 100000, Late: true})
	o.Settled(ctx, sluice.SettleEvent{Dimension: "openai#tpm", Estimate: 500, Actual: 600, Err: sluice.ErrUnavailable})
	o.Penalized(ctx, sluice.PenaltyEvent{Dimension: "openai#tpm", Factor: 0.5, Before: 1000, After: 500})
	o.Cooled(ctx, sluice.CooldownEvent{Dimension: "openai#rpm", Until: time.Unix(20, 0), Before: 5000})
	o.Cooled(ctx, sluice.CooldownEvent{Dimension: "openai#rpm", Err: sluice.ErrInvalid})
	o.Synced(ctx, sluice.SyncEvent{Dimension: "openai#tpm", Remaining: 3, Before: 5000, After: 3000})
	o.Synced(ctx, sluice.SyncEvent{Dimension: "openai#tpm", Remaining: 9, Before: 3000, After: 3000})
	o.Synced(ctx, sluice.SyncEvent{Dimension: "openai#tpm", Remaining: 0, Before: -1000, After: -1000})
	o.Synced(ctx, sluice.SyncEvent{Dimension: "openai#tpm", Remaining: 1, Err: sluice.ErrUnavailable})
	o.Released(ctx, sluice.ReleaseEvent{Lease: "l1", Held: 2 * time.Second, Recorded: true, Released: true})
	o.Released(ctx, sluice.ReleaseEvent{Lease: "l2", Held: 90 * time.Second})
	o.LeaseLost(ctx, sluice.LeaseLostEvent{Lease: "l3", Cause: sluice.ErrLeaseExpired})
	o.LeaseLost(ctx, sluice.LeaseLostEvent{Lease: "l4", Cause: errors.Join(errors.New("renew"), sluice.ErrUnavailable)})
	o.Reconciled(ctx, sluice.ReconcileEvent{Restored: 6, Reclaimed: 3, AlreadyCapped: 1, Orphans: 1, Duration: 4 * time.Millisecond})
	o.StoreError(ctx, sluice.StoreErrorEvent{Op: "acquire", Kind: sluice.KindUnavailable, Err: sluice.ErrUnavailable})
	o.StoreError(ctx, sluice.StoreErrorEvent{Op: "made_up", Kind: sluice.KindOther, Err: errors.New("x")})
	o.Recreated(ctx, sluice.RecreateEvent{Dimension: "openai#rpm", Op: "acquire"})
}

func TestInstruments(t *testing.T) {
	h := newHarness(t)
	feed(context.Background(), h.obs)
	got := h.points(t)
	tests := []struct{ point, want string }{
		{"sluice.acquisitions{sluice.dimension=openai#rpm,sluice.outcome=granted}", "2"},
		{"sluice.acquisitions{sluice.dimension=openai#tpm,sluice.outcome=granted}", "2"},
		{"sluice.acquisitions{sluice.dimension=openai#tpm,sluice.outcome=retry_in}", "1"},
		{"sluice.acquisitions{sluice.dimension=openai#rpm,sluice.outcome=degraded}", "1"},
		{"sluice.acquisitions{sluice.dimension=openai#tpm,sluice.outcome=error}", "1"},
		{"sluice.degraded_grants{sluice.dimension=openai#rpm}", "1"},
		{"sluice.buckets.recreated{sluice.dimension=openai#rpm,sluice.op=acquire}", "1"},
		{"sluice.acquire.duration{sluice.outcome=granted}:count", "2"},
		{"sluice.acquire.duration{sluice.outcome=granted}:sum", "0.005"},
		{"sluice.retry_in{sluice.dimension=openai#rpm}:sum", "1.5"},
		{"sluice.wait.duration{sluice.result=timeout}:sum", "30"},
		{"sluice.wait.attempts{sluice.result=granted}:sum", "2"},
		{"sluice.settlements{sluice.dimension=openai#tpm,sluice.result=ok}", "1"},
		{"sluice.settlements{sluice.dimension=openai#tpm,sluice.result=late}", "1"},
		{"sluice.settlements{sluice.dimension=openai#tpm,sluice.result=error}", "1"},
		{"sluice.settle.estimated_tokens{sluice.dimension=openai#tpm}", "1000"},
		{"sluice.settle.actual_tokens{sluice.dimension=openai#tpm}", "1320"},
		{"sluice.settle.delta{sluice.dimension=openai#tpm}:sum", "320"},
		{"sluice.settle.clamped{sluice.dimension=openai#tpm}", "1"},
		{"sluice.penalties{sluice.dimension=openai#tpm,sluice.result=ok}", "1"},
		{"sluice.cooldowns{sluice.dimension=openai#rpm,sluice.result=ok}", "1"},
		{"sluice.cooldowns{sluice.dimension=openai#rpm,sluice.result=error}", "1"},
		{"sluice.syncs{sluice.dimension=openai#tpm,sluice.result=lowered}", "1"},
		{"sluice.syncs{sluice.dimension=openai#tpm,sluice.result=unchanged}", "2"},
		{"sluice.syncs{sluice.dimension=openai#tpm,sluice.result=error}", "1"},
		{"sluice.releases{sluice.result=released}", "1"},
		{"sluice.releases{sluice.result=unrecorded}", "1"},
		{"sluice.lease.held{}:sum", "92"},
		{"sluice.leases_lost{sluice.cause=expired}", "1"},
		{"sluice.leases_lost{sluice.cause=unavailable}", "1"},
		{"sluice.reconcile.runs{sluice.result=ok}", "1"},
		{"sluice.reconcile.duration{}:sum", "0.004"},
		{"sluice.reconcile.restored{sluice.result=reclaimed}", "2"},
		{"sluice.reconcile.restored{sluice.result=already_capped}", "1"},
		{"sluice.reconcile.restored{sluice.result=cleaned}", "2"},
		{"sluice.reconcile.restored{sluice.result=orphan}", "1"},
		{"sluice.store.errors{sluice.kind=unavailable,sluice.op=acquire}", "1"},
		{"sluice.store.errors{sluice.kind=other,sluice.op=other}", "1"},
	}
	for _, tt := range tests {
		if g, ok := got[tt.point]; !ok {
			t.Errorf("%s missing", tt.point)
		} else if g != tt.want {
			t.Errorf("%s = %s, want %s", tt.point, g, tt.want)
		}
	}
	if t.Failed() {
		keys := make([]string, 0, len(got))
		for k, v := range got {
			keys = append(keys, k+" "+v)
		}
		sort.Strings(keys)
		t.Logf("points:\n%s", strings.Join(keys, "\n"))
	}
}

func TestSpans(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.obs.Acquired(ctx, sluice.AcquireEvent{Dimensions: both, Outcome: sluice.RetryIn, RetryIn: time.Second, Duration: 3 * time.Millisecond})
	h.obs.Acquired(ctx, sluice.AcquireEvent{Dimensions: both[:1], Err: sluice.ErrUnavailable, Duration: 2 * time.Second})
	h.obs.Waited(ctx, sluice.WaitEvent{Dimensions: both, Waited: 1500 * time.Millisecond, Attempts: 2, Granted: true})
	h.obs.Settled(ctx, sluice.SettleEvent{Dimension: "openai#tpm", Estimate: 500, Actual: 420, Applied: -80000})
	h.obs.Reconciled(ctx, sluice.ReconcileEvent{Restored: 2, Reclaimed: 1, Duration: 4 * time.Millisecond})
	tests := []struct {
		name     string
		duration time.Duration
		status   codes.Code
		attrs    map[string]string
	}{
		{"sluice.acquire", 3 * time.Millisecond, codes.Unset, map[string]string{
			"sluice.dimensions": `["openai#rpm","openai#tpm"]`, "sluice.costs": "[1,500]",
			"sluice.outcome": "retry_in", "sluice.retry_in_seconds": "1",
		}},
		{"sluice.acquire", 2 * time.Second, codes.Error, map[string]string{"sluice.outcome": "error"}},
		{"sluice.wait", 1500 * time.Millisecond, codes.Unset, map[string]string{"sluice.result": "granted", "sluice.attempts": "2"}},
		{"sluice.settle", 0, codes.Unset, map[string]string{
			"sluice.dimension": "openai#tpm", "sluice.result": "ok", "sluice.estimate_tokens": "500",
			"sluice.actual_tokens": "420", "sluice.applied_millitokens": "-80000",
		}},
		{"sluice.reconcile", 4 * time.Millisecond, codes.Unset, map[string]string{"sluice.restored": "2", "sluice.reclaimed": "1"}},
	}
	spans := h.spans.Ended()
	if len(spans) != len(tests) {
		t.Fatalf("%d spans ended, want %d", len(spans), len(tests))
	}
	for i, tt := range tests {
		sp := spans[i]
		if sp.Name() != tt.name {
			t.Errorf("span %d: name %q, want %q", i, sp.Name(), tt.name)
		}
		if got := sp.EndTime().Sub(sp.StartTime()); got != tt.duration {
			t.Errorf("%s: lasts %v, want %v", tt.name, got, tt.duration)
		}
		if got := sp.Status().Code; got != tt.status {
			t.Errorf("%s: status %v, want %v", tt.name, got, tt.status)
		}
		attrs := map[string]string{}
		for _, kv := range sp.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		for k, want := range tt.attrs {
			if got := attrs[k]; got != want {
				t.Errorf("%s: %s = %q, want %q", tt.name, k, got, want)
			}
		}
	}
	if ev := spans[1].Events(); len(ev) != 1 || ev[0].Name != "exception" {
		t.Errorf("failed acquire: events %v, want one exception", ev)
	}
}

// TestSpanParentAndEvents checks that the spans are children of the span
// in the context, and that lost leases and store errors become events on
// it.
func TestSpanParentAndEvents(t *testing.T) {
	h := newHarness(t)
	ctx, parent := h.tp.Tracer("test").Start(context.Background(), "request")
	h.obs.Acquired(ctx, sluice.AcquireEvent{Dimensions: both, Outcome: sluice.Granted})
	h.obs.LeaseLost(ctx, sluice.LeaseLostEvent{Lease: "l1", Cause: sluice.ErrLeaseExpired})
	h.obs.StoreError(ctx, sluice.StoreErrorEvent{Op: "extend", Kind: sluice.KindUnavailable, Err: sluice.ErrUnavailable})
	parent.End()
	spans := h.spans.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	child, req := spans[0], spans[1]
	if got, want := child.Parent().SpanID(), req.SpanContext().SpanID(); got != want {
		t.Errorf("acquire span's parent = %v, want the request span %v", got, want)
	}
	var names []string
	for _, e := range req.Events() {
		names = append(names, e.Name)
	}
	if got, want := strings.Join(names, ","), "sluice.lease_lost,sluice.store_error"; got != want {
		t.Errorf("request span events = %s, want %s", got, want)
	}
}

func TestMaxDimensions(t *testing.T) {
	h := newHarness(t, sluiceotel.WithMaxDimensions(1))
	for _, d := range []string{"a", "b", "c"} {
		h.obs.Acquired(context.Background(), sluice.AcquireEvent{Dimensions: []sluice.Request{{Dimension: d, Cost: 1}}, Outcome: sluice.Granted})
	}
	got := h.points(t)
	tests := []struct{ point, want string }{
		{"sluice.acquisitions{sluice.dimension=a,sluice.outcome=granted}", "1"},
		{"sluice.acquisitions{sluice.dimension=_other,sluice.outcome=granted}", "2"},
		{"sluice.acquisitions{sluice.dimension=b,sluice.outcome=granted}", ""},
	}
	for _, tt := range tests {
		if g := got[tt.point]; g != tt.want {
			t.Errorf("%s = %q, want %q", tt.point, g, tt.want)
		}
	}
}

func TestNewInvalid(t *testing.T) {
	_, err := sluiceotel.New(nil, nil, sluiceotel.WithMaxDimensions(-1))
	if !errors.Is(err, sluice.ErrInvalid) || !strings.Contains(err.Error(), `max_dimensions "-1"`) {
		t.Errorf("New with -1 dimensions: err = %v, want ErrInvalid naming max_dimensions", err)
	}
}

func TestWithoutSpans(t *testing.T) {
	reader, spans := sdkmetric.NewManualReader(), tracetest.NewSpanRecorder()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	obs, err := sluiceotel.New(mp, tp, sluiceotel.WithoutSpans())
	if err != nil {
		t.Fatal(err)
	}
	feed(context.Background(), obs)
	if n := len(spans.Ended()); n != 0 {
		t.Errorf("%d spans with WithoutSpans, want 0", n)
	}
	h := &harness{reader: reader}
	if got, want := h.points(t)["sluice.releases{sluice.result=released}"], "1"; got != want {
		t.Errorf("releases = %q, want %q", got, want)
	}
}

// TestConcurrentHooks feeds the same events from several goroutines, with
// spans recorded, and checks the totals (run with -race).
func TestConcurrentHooks(t *testing.T) {
	h := newHarness(t)
	const goroutines, rounds = 8, 50
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				feed(context.Background(), h.obs)
			}
		})
	}
	wg.Wait()
	got := h.points(t)
	n := fmt.Sprint(goroutines * rounds)
	tests := []struct{ point, want string }{
		{"sluice.acquisitions{sluice.dimension=openai#rpm,sluice.outcome=granted}", fmt.Sprint(2 * goroutines * rounds)},
		{"sluice.settlements{sluice.dimension=openai#tpm,sluice.result=error}", n},
		{"sluice.releases{sluice.result=unrecorded}", n},
	}
	for _, tt := range tests {
		if g := got[tt.point]; g != tt.want {
			t.Errorf("%s = %q, want %q", tt.point, g, tt.want)
		}
	}
	// Five acquisitions, two waits, three settlements and one reconcile
	// per feed.
	if got, want := len(h.spans.Ended()), 11*goroutines*rounds; got != want {
		t.Errorf("%d spans, want %d", got, want)
	}
}
