package sluice

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"

	"github.com/ontopix/sluice/store"
)

// releaseUnknown releases, in the background, the lease of an acquisition
// whose outcome the client does not know: the store failed with
// ErrUnavailable (a lost reply, an operation timeout), so it may have
// granted the lease although nobody holds it. Only an acquisition that
// leaves a lease record (a concurrent dimension, or WithRecord) can hold
// anything back (a release of any other finds no record), and only one
// whose id this call chose (fresh) may be released: a waiter in line reuses its id, and its next attempt finds a
// grant already made. The client, which chose the id, tries until the
// lease would have expired, with the backoff of a failed slot release
// (100 ms doubling to 5 s, jittered): a release that finds no record is
// tried again too, since the acquisition may still be on its way to the
// store (a frozen server applies what its socket holds when it resumes).
// The first release that restores something ends it.
func (c *Client) releaseUnknown(ctx context.Context, req *store.AcquireRequest, fresh bool, err error) {
	if !fresh || !errors.Is(err, store.ErrUnavailable) || len(req.Items) == 0 {
		return
	}
	// A lease known to leave a record is tried until it would expire; one
	// whose dimensions the client has not learned yet (its first call) only
	// until an answer says whether a record exists.
	sure := req.Record || c.anyConcurrent(req.Items)
	left := req.Now.Add(req.TTL).Sub(c.clock.Now())
	if left <= 0 {
		return
	}
	rreq := store.ReleaseRequest{ID: req.ID, Hint: req.Items[0].Dimension, Op: store.NewLeaseID()}
	items := append([]store.Item(nil), req.Items...)
	if c.unknown.ctx.Err() != nil {
		return // closed
	}
	bctx, cancel := context.WithTimeout(c.unknown.ctx, left)
	c.unknown.wg.Add(1)
	c.event(ctx, slog.LevelWarn, "acquire.unknown_outcome", items, slog.String("lease", req.ID.String()), slog.Bool("releasing", true))
	go func() {
		defer c.unknown.wg.Done()
		defer cancel()
		for attempt := 0; ; attempt++ {
			d := releaseBackoffCap
			if attempt < 6 {
				d = min(releaseBackoffCap, releaseBackoffBase<<attempt)
			}
			if sleep(bctx, d/2+rand.N(d/2+1)) != nil {
				return
			}
			res, err := storeCall(bctx, c, "release", func(ctx context.Context) (store.ReleaseResult, error) {
				rreq.Now = c.clock.Now()
				return c.st.Release(ctx, rreq)
			})
			if err == nil && res.Released {
				c.freed(items)
				c.event(bctx, slog.LevelInfo, "acquire.unknown_released", items, slog.String("lease", req.ID.String()), slog.Int("attempts", attempt+1))
				return
			}
			if (err != nil && !errors.Is(err, store.ErrUnavailable)) || (err == nil && !sure) {
				return
			}
		}
	}()
}

// background is work the client runs beside its callers, until Close.
type background struct {
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}
