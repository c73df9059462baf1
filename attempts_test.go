package sluice_test

import (
	"context"
	"errors"
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
			{name: "polls until the timeout", drain: 10_000, cost: 5_000, polling: true, want: 1},
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

// skewedDeadlineCtx is a context whose Done closes (with DeadlineExceeded)
// at another instant than the deadline it reports: how the runtime's timer
// and a deadline read with time.Until can disagree by a hair, made wide
// enough here to decide which one a wait sees first.
type skewedDeadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c skewedDeadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// A polling wait whose wait outlasts its context's deadline sleeps until
// the deadline and reports the timeout as every wait does (a
// *SlotTimeoutError matching ErrSlotTimeout and the context's error),
// whichever it sees first, the deadline's instant or the context's Done;
// it asks the store nothing once the deadline has passed.
func TestPollingWaitAsksNothingPastItsDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		done time.Duration // when the context's Done closes; its deadline is at 2 s
	}{
		{"Done closes first", 1500 * time.Millisecond},
		{"the deadline passes first", 2500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, st := newCountingClient(t)
				drain(t, c, "openai#tpm", 10_000)
				inner, cancel := context.WithTimeout(context.Background(), tc.done)
				defer cancel()
				ctx := skewedDeadlineCtx{Context: inner, deadline: time.Now().Add(2 * time.Second)}
				before := st.calls()
				attempts := -1
				_, err := c.Wait(ctx, []sluice.Request{{Dimension: "openai#tpm", Cost: 5_000}}, sluice.WithPolling(), sluice.WithAttemptCount(&attempts))
				var se *sluice.SlotTimeoutError
				if !errors.As(err, &se) || !errors.Is(err, sluice.ErrSlotTimeout) || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Wait = %v (%T); want a *SlotTimeoutError matching ErrSlotTimeout and context.DeadlineExceeded", err, err)
				}
				if got, want := attempts, 1; got != want || se.Attempts != want {
					t.Errorf("attempts %d (SlotTimeoutError.Attempts %d), want %d", got, se.Attempts, want)
				}
				if got, want := st.calls()-before, int64(1); got != want {
					t.Errorf("store calls %d, want %d: none after the deadline", got, want)
				}
			})
		})
	}
}
