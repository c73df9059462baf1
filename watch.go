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
// (store.FreedWatcher): started by the first wait in line, stopped by
// Client.Close.
type freedWatch struct {
	w      store.FreedWatcher // nil when the store has no such capability
	mu     sync.Mutex
	cancel context.CancelFunc // set once started
	closed bool
	done   chan struct{} // closed when the watch's goroutine returns
}

// Close stops the client's background work: the watch for slots freed by
// other processes that waiting in line starts (see WaitStrategy). Waits
// still running, and those started later, fall back to polling. It does
// not close the store, and the client stays usable. It waits for the
// watch to stop and is idempotent; it always returns nil.
func (c *Client) Close() error {
	fw := &c.watch
	fw.mu.Lock()
	fw.closed = true
	cancel, done := fw.cancel, fw.done
	fw.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// startWatch starts the watch for freed slots if the store can tell
// (store.FreedWatcher) and it is not running yet, nor the client closed.
func (c *Client) startWatch() {
	fw := &c.watch
	if fw.w == nil {
		return
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.cancel != nil || fw.closed {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	fw.cancel, fw.done = cancel, make(chan struct{})
	go c.runWatch(ctx, fw.done)
}

// runWatch watches until ctx ends or the store is closed, watching again
// after watchRetry when the store's watch fails.
func (c *Client) runWatch(ctx context.Context, done chan struct{}) {
	defer close(done)
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
// somewhere in the fleet: it wakes the local waiters on dim that are near
// the front of its queue (the slots may serve them; those further back
// would only ask in vain), or the oldest one when none is, and forgets
// the predicted timeouts, as freed does.
func (c *Client) remoteFreed(dim string) {
	c.horizons.Clear()
	c.waiters.mu.Lock()
	defer c.waiters.mu.Unlock()
	woke := false
	for _, lw := range c.waiters.byDim[dim] {
		if lw.far {
			continue
		}
		woke = true
		select {
		case lw.wake <- struct{}{}:
		default: // woken already
		}
	}
	if !woke {
		c.wakeLocked([]store.Item{{Dimension: dim, Cost: 1}})
	}
}

// setFar records whether lw's last answer left it far from the front of
// its queues (see nearFront), where a slot freed elsewhere cannot serve it.
func (c *Client) setFar(lw *localWaiter, far bool) {
	c.waiters.mu.Lock()
	lw.far = far
	c.waiters.mu.Unlock()
}

// freedWatcher returns st's watch capability, or nil.
func freedWatcher(st store.Store) store.FreedWatcher {
	w, _ := contract.Unwrap(st).(store.FreedWatcher)
	return w
}
