package redisstore

import (
	"context"
	"time"

	"github.com/ontopix/sluice/store"
)

var _ store.FreedWatcher = (*Store)(nil)

// closedCheck is how often a watch checks that the store is still open.
const closedCheck = 250 * time.Millisecond

// freedChannel is the Pub/Sub channel of the store's notices of freed
// units (store.FreedWatcher): prefix+"freed", one message per dimension.
// It is an ordinary channel, which a Redis Cluster broadcasts to every
// node, so a watch connected to any node hears every notice.
func (s *Store) freedChannel() string { return s.prefix + "freed" }

// publishFreed publishes a notice for each of dims, after the script that
// freed their units succeeded (Reconcile; Release and Dequeue publish from
// their scripts, in the same round trip). Delivery is best-effort: a failed publish
// costs the waiters elsewhere a poll interval, and is not the operation's
// failure.
func (s *Store) publishFreed(ctx context.Context, dims []string) {
	switch len(dims) {
	case 0:
	case 1:
		_ = s.rdb.Publish(ctx, s.freedChannel(), dims[0]).Err()
	default:
		pipe := s.rdb.Pipeline()
		for _, d := range dims {
			pipe.Publish(ctx, s.freedChannel(), d)
		}
		_, _ = pipe.Exec(ctx)
	}
}

// WatchFreed implements store.FreedWatcher with a subscription to the
// store's channel on one dedicated connection, which go-redis reconnects
// and subscribes again after an error or a server restart (notices
// published meanwhile are lost). The Release and Dequeue scripts publish
// a notice for the units they free; Reconcile publishes after its script. It returns ErrClosed within a
// quarter of a second of the store's Close.
func (s *Store) WatchFreed(ctx context.Context, freed func(dimension string)) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	ps := s.rdb.Subscribe(ctx, s.freedChannel())
	defer ps.Close()
	msgs := ps.Channel()
	tick := time.NewTicker(closedCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if s.closed.Load() {
				return store.ErrClosed
			}
		case m, ok := <-msgs:
			if !ok {
				return store.ErrClosed
			}
			freed(m.Payload)
		}
	}
}
