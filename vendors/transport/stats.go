package transport

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/ontopix/sluice/vendors"
)

// Stats counts what a Transport did outside its ordinary metering, since
// it was made. Each count only grows.
type Stats struct {
	// Passed counts requests to a routed vendor host sent unmetered: an
	// unknown endpoint under PassThrough, a body that could not be
	// estimated, a model without a profile under PassModel. Each is
	// also a Passed event.
	Passed uint64
	// Refused counts calls refused because their model matches no
	// profile (RefuseModel).
	Refused uint64
	// UsageCapped counts calls whose reported usage exceeded what the
	// request could have used, and was settled at the cap instead (see
	// Event.UsageCapped).
	UsageCapped uint64
	// EventPanics counts panics recovered from the WithEvents function.
	EventPanics uint64
	// DriftSamples counts the token dimensions' balances compared with
	// the vendor's remaining headers (one per dimension a response
	// reported; the Reactor's sync must be on, as by default), and
	// DriftAhead those where Sluice believed it had more than the vendor
	// reported: tokens the vendor had already counted (see
	// vendors.Drift). DriftMax is the largest drift seen, in tokens.
	// Transport.Drift gives them by dimension.
	DriftSamples, DriftAhead uint64
	DriftMax                 int64
}

// DriftStats sums the drifts (vendors.Drift.Tokens) of one dimension.
type DriftStats struct {
	// Samples counts the responses compared.
	Samples uint64
	// Ahead counts those where Sluice believed it had more than the
	// vendor reported: tokens the vendor had already counted.
	Ahead uint64
	// Last is the latest drift, in tokens.
	Last int64
	// Max and Min are the largest and smallest drifts seen.
	Max, Min int64
	// SumAhead sums the positive drifts, in tokens.
	SumAhead int64
}

type stats struct {
	passed, refused, capped, panics atomic.Uint64

	mu    sync.Mutex
	drift map[string]DriftStats
	all   DriftStats // every dimension's together
}

// Stats returns the Transport's counts. It is safe to call at any time.
func (t *Transport) Stats() Stats {
	s := Stats{Passed: t.stats.passed.Load(), Refused: t.stats.refused.Load(),
		UsageCapped: t.stats.capped.Load(), EventPanics: t.stats.panics.Load()}
	t.stats.mu.Lock()
	s.DriftSamples, s.DriftAhead, s.DriftMax = t.stats.all.Samples, t.stats.all.Ahead, t.stats.all.Max
	t.stats.mu.Unlock()
	return s
}

// Drift returns, by dimension, how far Sluice's balances were from the
// vendor's remaining headers over the responses synced so far (see
// Stats.DriftSamples); empty before the first.
func (t *Transport) Drift() map[string]DriftStats {
	t.stats.mu.Lock()
	defer t.stats.mu.Unlock()
	out := make(map[string]DriftStats, len(t.stats.drift))
	for k, v := range t.stats.drift {
		out[k] = v
	}
	return out
}

// addDrift counts the drifts a response's sync found. A drift above
// zero is logged on the Client's logger as "transport.drift" at debug
// level.
func (t *Transport) addDrift(ctx context.Context, ev *Event, ds []vendors.Drift) {
	if len(ds) == 0 {
		return
	}
	t.stats.mu.Lock()
	if t.stats.drift == nil {
		t.stats.drift = map[string]DriftStats{}
	}
	for _, d := range ds {
		n := d.Tokens()
		s, seen := t.stats.drift[d.Dimension]
		if !seen {
			s.Max, s.Min = n, n
		}
		s.Samples++
		s.Last, s.Max, s.Min = n, max(s.Max, n), min(s.Min, n)
		if n > 0 {
			s.Ahead++
			s.SumAhead += n
		}
		t.stats.drift[d.Dimension] = s
		a := &t.stats.all
		if a.Samples == 0 {
			a.Max, a.Min = n, n
		}
		a.Samples++
		a.Last, a.Max, a.Min = n, max(a.Max, n), min(a.Min, n)
		if n > 0 {
			a.Ahead++
			a.SumAhead += n
		}
	}
	t.stats.mu.Unlock()
	log := t.client.Logger()
	if !log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	for _, d := range ds {
		if d.Tokens() > 0 {
			log.LogAttrs(ctx, slog.LevelDebug, "transport.drift", slog.String("vendor", string(ev.Vendor)),
				slog.String("model", ev.Model), slog.String("dimension", d.Dimension),
				slog.Int64("believed", d.Believed), slog.Int64("reported", d.Reported), slog.Int64("drift", d.Tokens()))
		}
	}
}

// emit reports ev to the WithEvents function, if any. A panic in that
// function is recovered, logged on the Client's logger as
// "transport.event_panic" with its stack, and counted (Stats.EventPanics):
// the function may run on a timer's goroutine, where a panic would end
// the process, and the call's settlement is done before it runs.
func (t *Transport) emit(ctx context.Context, ev Event) {
	if t.events == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			t.stats.panics.Add(1)
			t.client.Logger().LogAttrs(ctx, slog.LevelError, "transport.event_panic",
				slog.String("vendor", string(ev.Vendor)), slog.String("model", ev.Model),
				slog.String("outcome", ev.Outcome.String()), slog.String("panic", fmt.Sprint(p)),
				slog.String("stack", string(debug.Stack())))
		}
	}()
	t.events(ctx, ev)
}
