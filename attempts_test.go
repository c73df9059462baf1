package sluice_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
)

// WithAttemptCount reports the attempts the WaitEvent counts, granted or
// not, reserving or polling.
func TestWithAttemptCountReportsTheWaitsAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		for _, tc := range []struct {
			name    string
			drain   int64 // tokens taken from openai#tpm first
			cost    int64
			polling bool
			granted bool
			want    int
		}{
			{name: "granted at once", cost: 1_000, granted: true, want: 1},
			{name: "reserved, valid later", drain: 10_000, cost: 100, granted: true, want: 1},
			{name: "fails fast", drain: 10_000, cost: 5_000, want: 1},
			{name: "polls until the timeout", drain: 10_000, cost: 5_000, polling: true, want: 2},
			{name: "invalid cost", cost: -1, want: 0},
		} {
			var events []sluice.WaitEvent
			obs := &sluice.Observer{Waited: func(_ context.Context, ev sluice.WaitEvent) { events = append(events, ev) }}
			c, _ := newCountingClient(t, sluice.WithObserver(obs))
			if tc.drain > 0 {
				drain(t, c, "openai#tpm", tc.drain)
			}
			got := -1
			opts := []sluice.AcquireOption{sluice.WithAttemptCount(&got)}
			if tc.polling {
				opts = append(opts, sluice.WithPolling())
			}
			l, err := c.Wait(within(ctx, t, 2*time.Second), []sluice.Request{{Dimension: "openai#tpm", Cost: tc.cost}}, opts...)
			if (l != nil) != tc.granted {
				t.Errorf("%s: Wait = %v, %v; want granted %v", tc.name, l, err, tc.granted)
			}
			if l != nil {
				_ = l.Release(ctx)
			}
			if got != tc.want {
				t.Errorf("%s: attempt count %d, want %d", tc.name, got, tc.want)
			}
			if len(events) == 1 && events[0].Attempts != got {
				t.Errorf("%s: attempt count %d, WaitEvent.Attempts %d; want the same", tc.name, got, events[0].Attempts)
			}
		}
	})
}
