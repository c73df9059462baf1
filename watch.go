package sluice

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// watchRetry is how long the client waits before watching again after
// the store's watch failed (store.FreedWatcher.WatchFreed returned an
// error other than ErrClosed).
const watchRetry = time.Second

// freedWatch is the client's watch for slots freed by other processes
// (store.FreedWatcher): it runs while the client has waiters in line, and
// for a poll interval after the last one left, so that a steady flow of
// waiters keeps one watch; Client.Close stops it.
type freedWatch struct {
	w       store.FreedWatcher // nil when the store has no such capability
	mu      sync.Mutex
	waiters int                // waits in line running
	cancel  context.CancelFunc // the running watch's; nil when none runs
	idle    *time.Timer        // stops the watch once idle; nil when not armed
	closed  bool
	wg      sync.WaitGroup // the watches' goroutines
}

// Close stops the client's background work: the watch for slots freed by
// other processes that waiting in line starts (see Wait), and the
// background releases of acquisitions whose answer a store failure lost
// (their leases then expire as any lost lease does; a test under
// testing/synctest whose store fails must close its clients). Waits still running, and those started later,
// fall back to polling. It does not close the store, and the client stays
// usable. It waits for the background work to stop and is idempotent; it
// always returns nil.
func (c *Client) Close() error {
	fw := &c.watch
	fw.mu.Lock()
	fw.closed = true
	c.stopWatchLocked()
	fw.mu.Unlock()
	fw.wg.Wait()
	c.unknown.close()
	return nil
}

// watchBegin counts a wait in line and starts the watch for freed slots
// if the store can tell (store.FreedWatcher), none runs and the client is
// not closed. Call watchEnd when the wait ends.
func (c *Client) watchBegin() {
	fw := &c.watch
	if fw.w == nil {
		return
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.waiters++
	if fw.idle != nil {
		fw.idle.Stop()
		fw.idle = nil
	}
	if fw.cancel != nil || fw.closed {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	fw.cancel = cancel
	fw.wg.Add(1)
	go c.runWatch(ctx)
}

// watchEnd ends a wait counted by watchBegin: the last one arms the stop
// of the watch a poll interval later, unless a wait starts meanwhile.
func (c *Client) watchEnd() {
	fw := &c.watch
	if fw.w == nil {
		return
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.waiters--; fw.waiters > 0 || fw.cancel == nil {
		return
	}
	fw.idle = time.AfterFunc(c.cfg.PollInterval, func() {
		fw.mu.Lock()
		defer fw.mu.Unlock()
		if fw.waiters == 0 {
			c.stopWatchLocked()
		}
	})
}

// stopWatchLocked stops the running watch, if any; the caller holds
// c.watch.mu.
func (c *Client) stopWatchLocked() {
	fw := &c.watch
	if fw.idle != nil {
		fw.idle.Stop()
		fw.idle = nil
	}
	if fw.cancel != nil {
		fw.cancel()
		fw.cancel = nil
	}
}

// runWatch watches until ctx ends or the store is closed, watching again
// after watchRetry when the store's watch fails.
func (c *Client) runWatch(ctx context.Context) {
	defer c.watch.wg.Done()
	for {
		err := c.watch.w.WatchFreed(ctx, c.remoteFreed)
		if ctx.Err() != nil || err == nil || errors.Is(err, store.ErrClosed) {
			return
		}
		c.log.LogAttrs(ctx, slog.LevelDebug, "watch.failed", slog.String("error", err.Error()))
		if sleep(ctx, watchRetry) != nil {
			return
		}
	}
}

// remoteFreed is a notice that units of dim may have been freed
// somewhere in the fleet. Every client with waiters on dim gets it, and
// the store serves its queue in order, so the notice wakes only the local
// waiters whose turn it may be, and counts down the others' (see
// localWaiter.skip): a release costs the store about one acquisition, by
// the waiter at the front, not one per client. Predicted timeouts are
// forgotten.
func (c *Client) remoteFreed(dim string) {
	c.horizons.Clear()
	c.waiters.mu.Lock()
	defer c.waiters.mu.Unlock()
	c.waiters.notices++
	c.wakeTurn([]store.Item{{Dimension: dim, Cost: 1}}, true)
}

// watching reports that the client's watch for freed units runs.
func (c *Client) watching() bool {
	fw := &c.watch
	if fw.w == nil {
		return false
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.cancel != nil
}

// freedWatcher returns st's watch capability, or nil.
func freedWatcher(st store.Store) store.FreedWatcher {
	w, _ := contract.Unwrap(st).(store.FreedWatcher)
	return w
}
