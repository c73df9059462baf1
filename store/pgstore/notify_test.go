package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store/storetest"
)

// A watch that heard nothing for several of its listening rounds still
// hears the next release, and ends with ErrClosed once the store is
// closed.
func TestWatchFreedAfterIdleAndClose(t *testing.T) {
	s := newStore(t)
	storetest.FreedAfterIdleAndClose(t, s, listenPoll, s.Close)
}

// TestListenConnectsAsThePoolDoes gives the pool a BeforeConnect hook, the
// place where cloud IAM tokens are set: the watch's own connection, made
// outside the pool, must go through it too, or it fails to authenticate
// forever while waiters fall back to polling.
func TestListenConnectsAsThePoolDoes(t *testing.T) {
	pool := pgtest.Pool(t, func(c *pgxpool.Config) {
		c.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
			cc.RuntimeParams["application_name"] = "via-before-connect"
			return nil
		}
	})
	s := newStoreOn(t, pool)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.WatchFreed(ctx, func(string) {}) }()
	probe := pgtest.Pool(t, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := probe.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND application_name = 'via-before-connect'").Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no LISTEN connection made through the pool's BeforeConnect within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
