package sluice

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// An acquisition whose outcome the client does not know — the store call
// failed with ErrUnavailable (a lost reply, an operation timeout) or was
// cut off by the caller's context while it was in flight — may have been
// granted although nobody holds the lease. The id is the client's own
// (callers cannot choose one, and a waiter in line drops its id when its
// wait fails), so nothing else will ever release it: the client does.
//
// Nothing is done when the outcome is known: a store in this process
// answers or fails before acting, and a failure to connect means the
// request never left. Only an acquisition that leaves a lease record (a
// concurrent dimension, or WithRecord) can hold anything back; a release of
// any other finds no record. A release that finds no record is tried again
// while the lease is known to leave one, since the acquisition may still be
// on its way to the store (a frozen server applies what its socket holds
// when it resumes), until the lease would have expired; the first release
// that restores something ends it.
//
// The releases are kept in one list per client, at most maxUnknown. When
// the store failed, one background goroutine works through the list with
// the backoff of a failed slot release (100 ms doubling to 5 s, jittered,
// per lease), stopping a pass at the first release the store does not
// answer, until the list is empty or Client.Close. When the caller gave
// up, the store is most likely healthy and the caller may be going away:
// the release is left to this client's next acquisition that the store
// answers, on the same backoff, so that a cancelled call starts no work
// that outlives it.

// unknownAcquisition is the release of an acquisition whose outcome the
// client does not know.
type unknownAcquisition struct {
	req     store.ReleaseRequest
	items   []store.Item
	sure    bool      // the lease leaves a record: "no record" is not final
	typed   bool      // the dimensions' types were read (keepsRecords)
	expiry  time.Time // when the lease would expire, on the client's clock
	until   time.Time // the same instant on the runtime's clock, which bounds the work whatever the Clock does
	attempt int
	due     time.Time // the next attempt, on the client's clock
}

// next schedules u's next attempt after a failed one.
func (u *unknownAcquisition) next(now time.Time) {
	u.due = now.Add(releaseDelay(u.attempt))
	u.attempt++
}

// releaseDelay is the backoff before attempt n of a background release:
// 100 ms doubling to 5 s, with equal jitter.
func releaseDelay(n int) time.Duration {
	d := releaseBackoffCap
	if n < 6 {
		d = min(releaseBackoffCap, releaseBackoffBase<<n)
	}
	return d/2 + rand.N(d/2+1)
}

// releaseUnknown starts the release of req's lease if the outcome of its
// acquisition, which failed with err, is unknown (see above).
func (c *Client) releaseUnknown(ctx context.Context, req *store.AcquireRequest, err error) {
	if c.inProcess || len(req.Items) == 0 || neverSent(err) {
		return
	}
	cut := callerDone(ctx)
	if !cut && !errors.Is(err, store.ErrUnavailable) {
		return
	}
	now := c.clock.Now()
	u := &unknownAcquisition{
		req:    store.ReleaseRequest{ID: req.ID, Hint: req.Items[0].Dimension, Op: store.NewLeaseID()},
		items:  append([]store.Item(nil), req.Items...),
		sure:   req.Record || c.anyConcurrent(req.Items),
		expiry: req.Now.Add(req.TTL),
	}
	if !now.Before(u.expiry) {
		return
	}
	u.until = time.Now().Add(u.expiry.Sub(now))
	u.next(now)
	c.event(ctx, slog.LevelInfo, "acquire.unknown_outcome", u.items, slog.String("lease", req.ID.String()),
		slog.Bool("caller_done", cut), slog.String("error", err.Error()))
	c.unknown.add(u)
	if !cut {
		c.unknown.start(c.releaseLoop)
	}
}

// releaseOnce makes one attempt at u's release and reports that it is
// over (restored, or known to hold nothing) or that the store did not
// answer. When it is not over, it schedules the next attempt.
func (c *Client) releaseOnce(ctx context.Context, u *unknownAcquisition) (over, down bool) {
	res, err := storeCall(ctx, c, "release", func(ctx context.Context) (store.ReleaseResult, error) {
		u.req.Now = c.clock.Now()
		return c.st.Release(ctx, u.req)
	})
	switch {
	case err == nil && res.Released:
		c.freed(u.items)
		c.event(ctx, slog.LevelInfo, "acquire.unknown_released", u.items, slog.String("lease", u.req.ID.String()), slog.Int("attempts", u.attempt))
		return true, false
	case err != nil && !errors.Is(err, store.ErrUnavailable):
		return true, false
	case err == nil && !u.sure && (u.typed || !c.keepsRecords(ctx, u)):
		return true, false
	}
	u.next(c.clock.Now())
	return !u.due.Before(u.expiry), err != nil
}

// keepsRecords reads the types of u's dimensions, which the client had not
// learned (the acquisition was its first on them), and reports whether
// any is concurrent, so that its lease leaves a record: a release that
// found none may have come before the acquisition reached the store.
func (c *Client) keepsRecords(ctx context.Context, u *unknownAcquisition) bool {
	u.typed = true
	dims := make([]string, len(u.items))
	for i, it := range u.items {
		dims[i] = it.Dimension
	}
	states, err := storeCall(ctx, c, "peek", func(ctx context.Context) ([]store.BucketState, error) {
		return c.st.Peek(ctx, store.PeekRequest{Now: c.clock.Now(), Dimensions: dims})
	})
	if err != nil {
		return false
	}
	for _, s := range states {
		if s.Config.Type == bucket.Concurrent {
			c.concurrent.Store(s.Name, true)
			u.sure = true
		}
	}
	return u.sure
}

// releaseDue makes the attempts that are due, until the store does not
// answer one, and keeps what is not over. It reports whether the store
// answered every attempt.
func (c *Client) releaseDue(ctx context.Context) bool {
	due := c.unknown.takeDue(c.clock.Now())
	for i, u := range due {
		over, down := c.releaseOnce(ctx, u)
		if !over {
			c.unknown.add(u)
		}
		if down {
			for _, u := range due[i+1:] {
				c.unknown.add(u)
			}
			return false
		}
	}
	return true
}

// releaseDeferred makes the attempts that are due; the store just
// answered this client's acquisition.
func (c *Client) releaseDeferred(ctx context.Context) {
	if c.unknown.n.Load() == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	c.releaseDue(rctx)
}

// releaseLoop works through the list in the background until it is empty
// or ctx (Client.Close) ends.
func (c *Client) releaseLoop(ctx context.Context) {
	for {
		next, ok := c.unknown.nextDue()
		if !ok {
			return
		}
		if sleep(ctx, next.Sub(c.clock.Now())) != nil {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
		c.releaseDue(rctx)
		cancel()
	}
}

// neverSent reports a store failure that happened before the request left
// this process: the connection could not be made, so the store did not act.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// maxUnknown bounds the deferred releases a client remembers; beyond it
// the oldest is dropped and its lease left to expire.
const maxUnknown = 1024

// unknownReleases is the client's releases of acquisitions whose outcome
// it does not know: the background ones, which Close ends, and the
// deferred ones. Its context is made by the first background release,
// inside that caller's goroutine group (a testing/synctest bubble, say),
// not when the client is built.
type unknownReleases struct {
	mu       sync.Mutex
	ctx      context.Context
	stop     context.CancelFunc
	closed   bool
	running  bool // the background loop runs
	wg       sync.WaitGroup
	deferred []*unknownAcquisition
	n        atomic.Int32 // len(deferred), read without mu on every acquisition
}

// start runs f in the background unless it runs already or the client
// is closed.
func (b *unknownReleases) start(f func(context.Context)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.running {
		return
	}
	if b.ctx == nil {
		b.ctx, b.stop = context.WithCancel(context.Background())
	}
	b.running = true
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f(b.ctx)
	}()
}

// add keeps u; the oldest is dropped (its lease left to expire) beyond
// maxUnknown.
func (b *unknownReleases) add(u *unknownAcquisition) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.deferred) >= maxUnknown {
		b.deferred = b.deferred[1:]
	}
	b.deferred = append(b.deferred, u)
	b.n.Store(int32(len(b.deferred)))
}

// nextDue returns the earliest attempt due. With none left, it reports
// false and marks the background loop stopped (under the same lock as
// start, so that a release added meanwhile starts a new one).
func (b *unknownReleases) nextDue() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.deferred) == 0 {
		b.running = false
		return time.Time{}, false
	}
	next := b.deferred[0].due
	for _, u := range b.deferred[1:] {
		if u.due.Before(next) {
			next = u.due
		}
	}
	return next, true
}

// takeDue removes and returns the deferred releases due at now, dropping
// those whose lease has expired.
func (b *unknownReleases) takeDue(now time.Time) []*unknownAcquisition {
	if b.n.Load() == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.deferred) == 0 {
		return nil
	}
	var due []*unknownAcquisition
	kept := b.deferred[:0]
	wall := time.Now()
	for _, u := range b.deferred {
		switch {
		case !now.Before(u.expiry), !wall.Before(u.until):
		case !now.Before(u.due):
			due = append(due, u)
		default:
			kept = append(kept, u)
		}
	}
	clear(b.deferred[len(kept):])
	b.deferred = kept
	b.n.Store(int32(len(kept)))
	return due
}

// close ends the background releases and waits for them; later ones are
// not started. Deferred ones are kept.
func (b *unknownReleases) close() {
	b.mu.Lock()
	b.closed = true
	if b.stop != nil {
		b.stop()
	}
	b.mu.Unlock()
	b.wg.Wait()
}
