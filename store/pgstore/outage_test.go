package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
)

// TestOutage stops a server of its own mid-run the way pg_ctl stop -m
// immediate does: operations fail with store.ErrUnavailable (within the
// store's timeout, which bounds them), and after a restart the same pool
// recovers with every committed balance and lease intact.
func TestOutage(t *testing.T) {
	srv := ownServer(t)
	pool := pgtest.PoolAt(t, srv.URL, func(c *pgxpool.Config) {
		c.MaxConns = 4
		c.ConnConfig.ConnectTimeout = time.Second
	})
	s := newStoreOn(t, pool, WithCallerClock(), WithTimeout(3*time.Second))
	ctx := context.Background()
	put(t, s, store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Hour)})
	put(t, s, store.Bucket{Name: "el#concurrent", Config: bucket.ConcurrentSlots(5)})
	acquire := func(items ...store.Item) (store.AcquireResult, error) {
		var res store.AcquireResult
		err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: items, ID: store.NewLeaseID(), TTL: time.Hour}, &res)
		return res, err
	}
	for range 10 {
		if res, err := acquire(store.Item{Dimension: "openai#rpm"}, store.Item{Dimension: "el#concurrent", Cost: 0}); err != nil || !res.Granted {
			if err == nil && !res.Granted {
				break // the concurrent bucket is full; that is fine
			}
			t.Fatal(err)
		}
	}
	before, err := s.ListBuckets(ctx, store.ListBucketsRequest{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	leasesBefore, err := s.Leases(ctx, store.LeaseQuery{Now: t0})
	if err != nil {
		t.Fatal(err)
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // broken pooled connections, then refused dials
		start := time.Now()
		_, err := acquire(store.Item{Dimension: "openai#rpm"})
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("acquire %d during the outage: %v, want ErrUnavailable", i, err)
		}
		t.Logf("acquire %d with the server down: ErrUnavailable after %v", i, time.Since(start).Round(time.Microsecond))
	}
	if _, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"openai#rpm"}}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("peek during the outage: %v, want ErrUnavailable", err)
	}
	if _, err := s.Release(ctx, store.ReleaseRequest{Now: t0, ID: leasesBefore[0].ID}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("release during the outage: %v, want ErrUnavailable", err)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	deadline := restarted.Add(30 * time.Second)
	for { // the pool reconnects on its own; poll until it has
		if _, err := s.ListBuckets(ctx, store.ListBucketsRequest{Now: t0}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the pool did not recover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the pool served again %v after the server accepted connections", time.Since(restarted).Round(time.Millisecond))
	after, err := s.ListBuckets(ctx, store.ListBucketsRequest{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	leasesAfter, err := s.Leases(ctx, store.LeaseQuery{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) || len(leasesAfter) != len(leasesBefore) {
		t.Fatalf("after the restart: %d buckets, %d leases; before: %d, %d", len(after), len(leasesAfter), len(before), len(leasesBefore))
	}
	for i := range before {
		if after[i].Name != before[i].Name || after[i].Tokens != before[i].Tokens || after[i].ActiveLeases != before[i].ActiveLeases {
			t.Errorf("bucket %s: %d millitokens, %d leases after the restart; %d, %d before",
				before[i].Name, after[i].Tokens, after[i].ActiveLeases, before[i].Tokens, before[i].ActiveLeases)
		}
	}
	if res, err := acquire(store.Item{Dimension: "openai#rpm"}); err != nil || !res.Granted {
		t.Fatalf("acquire after the restart: %v %+v", err, res)
	}
}

// TestReadOnlyServer sends the store's writes to a server that accepts
// only reads, as a demoted primary does after a failover while DNS still
// names it: the store must call that an outage (store.ErrUnavailable, so
// that the failure policy applies), as Redis's READONLY is.
func TestReadOnlyServer(t *testing.T) {
	s := newStoreOn(t, pgtest.Pool(t, nil))
	put(t, s, store.Bucket{Name: "ro#rpm", Config: bucket.PerPeriod(bucket.Requests, 1000, time.Minute)})
	ro := reopen(t, s)
	ro.pool = pgtest.Pool(t, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	})
	var res store.AcquireResult
	err := ro.Acquire(context.Background(), &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "ro#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute, Record: true}, &res)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("acquire on a read-only server: %v, want store.ErrUnavailable", err)
	}
}

// TestLockTimeout runs an acquisition behind a row locked by another
// session on a server whose lock_timeout (a common production guard)
// cancels the wait: the statement rolled back, nothing was applied, and the
// store must call it an outage (store.ErrUnavailable, as a statement
// timeout is), not return the server's error bare, which a failing-open
// client would refuse and the CLI report as a plain failure.
func TestLockTimeout(t *testing.T) {
	pool := pgtest.Pool(t, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["lock_timeout"] = "100ms"
	})
	s := newStoreOn(t, pool)
	ctx := context.Background()
	put(t, s, store.Bucket{Name: "lt#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)})
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+s.schema+".buckets WHERE name = 'lt#rpm' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	var res store.AcquireResult
	err = s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "lt#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("acquire behind a row lock past lock_timeout: %v, want store.ErrUnavailable", err)
	}
	_ = tx.Rollback(ctx)
	if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "lt#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res); err != nil || !res.Granted {
		t.Errorf("acquire once the lock is gone: %v %+v", err, res)
	}
}
