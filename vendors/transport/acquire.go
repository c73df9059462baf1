package transport

import (
	"context"
	"time"

	"github.com/ontopix/sluice"
)

// acquire takes reqs all-or-nothing with the Client's Wait, bounded by the
// request's deadline, or by maxWait when it has none. By default the wait
// is in line (sluice.WaitReserve): the tokens are reserved in one store
// call and a wait the store answers that would end past the bound fails at
// once with a *sluice.SlotTimeoutError, reserving nothing. With WithPolling
// it polls. It returns the lease, how long it waited and the number of
// attempts.
func (t *Transport) acquire(ctx context.Context, reqs []sluice.Request) (*sluice.Lease, time.Duration, int, error) {
	timeout := t.maxWait
	if d, ok := ctx.Deadline(); ok {
		// The Client measures a context's deadline on the runtime's clock:
		// so does the timeout. A deadline already past still needs a
		// positive timeout (0 is the Client's default), and fails at once.
		timeout = max(time.Until(d), time.Nanosecond)
	}
	var attempts int
	opts := make([]sluice.AcquireOption, 1, 2)
	opts[0] = sluice.WithAttemptCount(&attempts)
	if t.polling {
		opts = append(opts, sluice.WithPolling())
	}
	start := t.clock.Now()
	l, err := t.client.Wait(ctx, reqs, timeout, opts...)
	return l, t.clock.Now().Sub(start), attempts, err
}
