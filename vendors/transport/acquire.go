package transport

import (
	"context"
	"time"

	"github.com/ontopix/sluice"
)

// acquire takes reqs all-or-nothing with the Client's SlotMany, whose wait
// ends at the request's deadline, or after the Client's
// DefaultSlotTimeout when it has none, and whose handle renews the lease
// until the call releases it. By default the wait is in line: the tokens
// are reserved in one store call and a wait the store answers that would
// end past the bound fails at once with a *sluice.SlotTimeoutError,
// reserving nothing. With WithPolling it polls. It returns the handle,
// how long it waited and the number of attempts.
func (t *Transport) acquire(ctx context.Context, reqs []sluice.Request) (*sluice.SlotHandle, time.Duration, int, error) {
	var attempts int
	opts := make([]sluice.AcquireOption, 1, 2)
	opts[0] = sluice.WithAttemptCount(&attempts)
	if t.polling {
		opts = append(opts, sluice.WithPolling())
	}
	start := t.clock.Now()
	h, err := t.client.SlotMany(ctx, reqs, opts...)
	return h, t.clock.Now().Sub(start), attempts, err
}
