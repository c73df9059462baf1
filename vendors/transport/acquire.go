package transport

import (
	"context"
	"time"

	"github.com/ontopix/sluice"
)

// acquire takes reqs all-or-nothing with the Client's Wait, which ends at
// the request's deadline, or after maxWait when it has none. By default
// the wait is in line: the tokens are reserved in one store call and a
// wait the store answers that would end past the bound fails at once with
// a *sluice.SlotTimeoutError, reserving nothing. With WithPolling it
// polls. It returns the lease, how long it waited and the number of
// attempts.
func (t *Transport) acquire(ctx context.Context, reqs []sluice.Request) (*sluice.Lease, time.Duration, int, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.maxWait)
		defer cancel()
	}
	var attempts int
	opts := make([]sluice.AcquireOption, 1, 2)
	opts[0] = sluice.WithAttemptCount(&attempts)
	if t.polling {
		opts = append(opts, sluice.WithPolling())
	}
	start := t.clock.Now()
	l, err := t.client.Wait(ctx, reqs, opts...)
	return l, t.clock.Now().Sub(start), attempts, err
}
