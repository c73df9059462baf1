package transport

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
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
}

type stats struct {
	passed, refused, capped, panics atomic.Uint64
}

// Stats returns the Transport's counts. It is safe to call at any time.
func (t *Transport) Stats() Stats {
	return Stats{Passed: t.stats.passed.Load(), Refused: t.stats.refused.Load(),
		UsageCapped: t.stats.capped.Load(), EventPanics: t.stats.panics.Load()}
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
