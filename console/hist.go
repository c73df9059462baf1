package console

import (
	"context"
	"time"

	"github.com/ontopix/sluice/history"
)

// WithHistory adds r's usage history to the console: the overview's
// last-minute columns (from r.Live), the dimensions' charts and callers
// (r.Query and r.Callers) and the event log (r.Events). Without it the
// console shows the limiter's state only.
func WithHistory(r *history.Recorder) Option {
	return func(h *handler) {
		if r != nil {
			h.hist = r
		}
	}
}

// historian is what the console reads from a usage history; a
// *history.Recorder is one. It is an interface so that the pages can be
// tested against a recorded history as well as a live one.
type historian interface {
	Query(ctx context.Context, q history.Query) ([]history.Point, error)
	Callers(ctx context.Context, dimension string, from, to time.Time) (map[string]history.Counts, error)
	Live(dimension string) history.Counts
	Events(n int) []history.Event
}

var _ historian = (*history.Recorder)(nil)

// waitBounds are the upper bounds of the wait histograms.
var waitBounds = history.WaitBounds
