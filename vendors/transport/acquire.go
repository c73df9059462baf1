package transport

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/ontopix/sluice"
)

// acquire takes reqs all-or-nothing, waiting out RETRY_IN answers until the
// request's deadline (or maxWait when it has none). A wait the store
// answers that would end past the deadline fails at once with a
// *sluice.SlotTimeoutError rather than sleeping until it. It returns the
// lease, how long it waited and the number of attempts.
func (t *Transport) acquire(ctx context.Context, reqs []sluice.Request) (*sluice.Lease, time.Duration, int, error) {
	start := t.clock.Now()
	deadline := start.Add(t.maxWait)
	timeout := t.maxWait
	if d, ok := ctx.Deadline(); ok {
		deadline, timeout = d, d.Sub(start)
	}
	for attempt := 1; ; attempt++ {
		res, err := t.client.AcquireMany(ctx, reqs)
		if err != nil {
			return nil, t.clock.Now().Sub(start), attempt, err
		}
		if res.Granted() {
			return res.Lease, t.clock.Now().Sub(start), attempt, nil
		}
		now := t.clock.Now()
		if now.Add(res.RetryIn).After(deadline) {
			dims := make([]string, len(reqs))
			for i, r := range reqs {
				dims[i] = r.Dimension
			}
			return nil, now.Sub(start), attempt, &sluice.SlotTimeoutError{Dimensions: dims, Timeout: timeout, RetryIn: res.RetryIn, Attempts: attempt}
		}
		wait := min(jitter(res.RetryIn), deadline.Sub(now))
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, t.clock.Now().Sub(start), attempt, context.Cause(ctx)
		case <-timer.C:
		}
	}
}

// jitter spreads the retries of callers denied at the same moment, as the
// Client's own waiting does: it adds up to 10 % of d, at least 1 ms and at
// most 100 ms, so that waiting never ends before the exact RETRY_IN.
func jitter(d time.Duration) time.Duration {
	spread := min(max(d/10, time.Millisecond), 100*time.Millisecond)
	return d + rand.N(spread+1)
}
