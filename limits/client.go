package limits

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store"
)

// NewClient returns a Client over st for the limits of f, as a service
// builds one at start-up: the client knows f's buckets (sluice.WithBuckets)
// and re-creates one the store lost, as a store restarted without
// persistence loses them all, without refilling one another replica
// re-created first; and f is applied (Apply) before NewClient returns.
//
// When the store cannot be reached (sluice.ErrUnavailable) and the client
// fails open (Config.FailurePolicy sluice.FailOpen), NewClient returns
// the client anyway, so that a replica starts while the store is down, and
// applies f in the background, retrying with backoff (1 s doubling to 30 s,
// jittered; logged as limits.apply_retry and limits.applied on the
// client's logger) until it succeeds or ctx is done: pass a context that
// lives as long as the service, not a start-up timeout. Calls meanwhile
// follow the failure policy. Failing closed, NewClient returns the error.
//
// NewClient does not take ownership of st.
func NewClient(ctx context.Context, st store.Store, f *File, opts ...sluice.Option) (*sluice.Client, error) {
	opts = append(opts[:len(opts):len(opts)], sluice.WithBuckets(f.Buckets()))
	c, err := sluice.New(st, opts...)
	if err != nil {
		return nil, err
	}
	_, err = Apply(ctx, c, f)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, sluice.ErrUnavailable) && c.Config().FailurePolicy == sluice.FailOpen && ctx.Err() == nil:
		c.Logger().LogAttrs(ctx, slog.LevelWarn, "limits.apply_retry", slog.String("file", f.Name),
			slog.String("error", err.Error()), slog.Duration("retry_in", time.Second))
		go applyUntilDone(ctx, c, f)
		return c, nil
	}
	return nil, err
}

// applyUntilDone applies f until it succeeds or ctx is done, backing off
// between attempts.
func applyUntilDone(ctx context.Context, c *sluice.Client, f *File) {
	wait := time.Second
	for attempt := 2; ; attempt++ {
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		changes, err := Apply(ctx, c, f)
		if err == nil {
			c.Logger().LogAttrs(ctx, slog.LevelInfo, "limits.applied", slog.String("file", f.Name),
				slog.Int("attempt", attempt), slog.Int("changes", len(changes)))
			return
		}
		wait = min(2*wait, 30*time.Second)
		c.Logger().LogAttrs(ctx, slog.LevelWarn, "limits.apply_retry", slog.String("file", f.Name),
			slog.Int("attempt", attempt), slog.String("error", err.Error()), slog.Duration("retry_in", wait))
	}
}
