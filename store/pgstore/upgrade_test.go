package pgstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
)

// oldAcquire calls the version-3 acquire function, as a process still
// running the previous code does, and returns whether it granted.
func oldAcquire(t *testing.T, pool *pgxpool.Pool, sch string, at time.Duration, id store.LeaseID, dim string, cost int64) bool {
	t.Helper()
	var code *string
	var granted *bool
	err := pool.QueryRow(context.Background(), `SELECT o_err, o_granted FROM `+sch+`.acquire($1::text[], $2::bigint[], $3::bigint,
		$4::bigint, $5::uuid, $6::text, $7::boolean, $8::bigint, $9::bigint)`,
		[]string{dim}, []int64{cost}, t0.Add(at).UnixMilli(), time.Hour.Milliseconds(), uuidOf(id), "old", true, int64(1000), int64(1000)).
		Scan(&code, &granted)
	if err != nil || code != nil || granted == nil {
		t.Fatalf("version-3 acquire: %v, %v, %v", code, granted, err)
	}
	return *granted
}

// TestMigrateFromVersion3 upgrades in place a schema at version 3 holding
// live buckets and leases written by the version-3 functions: this code
// refuses to run on it with the error that says to migrate, the upgrade
// keeps every balance and lease (they read as never reserved, granted by
// acquisitions, with no waiters), reservations and queues work at once,
// and the version-3 acquire that processes of the previous code still call
// keeps working and does not overtake a waiter.
func TestMigrateFromVersion3(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, nil)
	schema := pgtest.Schema()
	sch := pgx.Identifier{schema}.Sanitize()
	createAtVersion(t, pool, schema, 3)
	s, err := New(pool, WithSchema(schema), WithCallerClock(), WithTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, store.Bucket{Name: "r", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	put(t, s, store.Bucket{Name: "c", Config: bucket.ConcurrentSlots(2)})
	spent, held := store.NewLeaseID(), store.NewLeaseID()
	if !oldAcquire(t, pool, sch, 0, spent, "r", 4) || !oldAcquire(t, pool, sch, 0, held, "c", 1) {
		t.Fatal("version-3 acquisitions denied")
	}

	// This code on the version-3 schema: an acquisition without a queue
	// works (through the version-3 function); the rest says to migrate
	// (never ErrUnavailable).
	at6 := t0.Add(6 * time.Second)
	var ar store.AcquireResult
	early := store.NewLeaseID()
	if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "c"}}, ID: early, TTL: time.Hour}, &ar); err != nil || !ar.Granted || !ar.Recorded {
		t.Fatalf("Acquire on a version-3 schema = %+v, %v; want the second slot granted", ar, err)
	}
	if rr, err := s.Release(ctx, store.ReleaseRequest{Now: t0, ID: early}); err != nil || !rr.Released {
		t.Fatalf("Release on a version-3 schema = %+v, %v", rr, err)
	}
	for op, f := range map[string]func() error{
		"queued acquire": func() error {
			var res store.AcquireResult
			return s.Acquire(ctx, &store.AcquireRequest{Now: at6, Items: []store.Item{{Dimension: "c"}}, ID: store.NewLeaseID(),
				TTL: time.Second, Queue: time.Second}, &res)
		},
		"reserve": func() error {
			var res store.ReserveResult
			return s.Reserve(ctx, &store.ReserveRequest{Now: at6, Items: []store.Item{{Dimension: "r"}}, ID: store.NewLeaseID(), TTL: time.Second}, &res)
		},
		"cancel": func() error {
			_, err := s.Cancel(ctx, store.CancelRequest{Now: at6, ID: spent, Recorded: true})
			return err
		},
		"dequeue": func() error {
			return s.Dequeue(ctx, store.DequeueRequest{Now: at6, ID: spent, Dimensions: []string{"c"}})
		},
		"peek": func() error {
			_, err := s.Peek(ctx, store.PeekRequest{Now: at6, Dimensions: []string{"r"}})
			return err
		},
		"leases": func() error {
			_, err := s.Leases(ctx, store.LeaseQuery{Now: at6})
			return err
		},
	} {
		if err := f(); err == nil || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "run Migrate") {
			t.Errorf("%s on a version-3 schema: %v; want an error saying to migrate", op, err)
		}
	}

	if from, to, err := s.MigrateReport(ctx); err != nil || from != 3 || to != SchemaVersion() {
		t.Fatalf("MigrateReport = %d, %d, %v; want 3, %d", from, to, err, SchemaVersion())
	}
	st, err := s.Peek(ctx, store.PeekRequest{Now: at6, Dimensions: []string{"r", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := st[0]; r.Tokens != 7_000 || r.LastRefill != at6.UnixMilli() || r.ReservedUntil != 0 || r.ActiveLeases != 1 {
		t.Errorf("r after the upgrade = %+v; want 7000 millitokens at t0+6s (6 left, one earned), never reserved, 1 lease", r)
	}
	if c := st[1]; c.Tokens != 1_000 || c.ActiveLeases != 1 || c.Waiters != 0 {
		t.Errorf("c after the upgrade = %+v; want 1000 millitokens, 1 lease, no waiters", c)
	}
	ls, err := s.Leases(ctx, store.LeaseQuery{Now: at6})
	if err != nil || len(ls) != 2 || !ls[0].ValidAt.IsZero() || !ls[1].ValidAt.IsZero() {
		t.Errorf("Leases after the upgrade = %+v, %v; want the two leases, granted by acquisitions", ls, err)
	}

	// A reservation on the upgraded bucket: 7 tokens held, 8 reserved, the
	// eighth earned 6 s later.
	res := store.ReserveResult{}
	rid := store.NewLeaseID()
	if err := s.Reserve(ctx, &store.ReserveRequest{Now: at6, Items: []store.Item{{Dimension: "r", Cost: 8}}, ID: rid,
		TTL: time.Second, MaxWait: time.Minute, Record: true}, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Granted || res.Wait != 6*time.Second || !res.ValidAt.Equal(t0.Add(12*time.Second)) || res.Items[0].Remaining != -1_000 {
		t.Errorf("Reserve after the upgrade = %+v; want granted, valid 6 s later, 1000 millitokens below zero", res)
	}
	if oldAcquire(t, pool, sch, 6*time.Second, store.NewLeaseID(), "r", 1) {
		t.Error("the version-3 acquire was granted a token that a reservation holds")
	}
	cr, err := s.Cancel(ctx, store.CancelRequest{Now: at6, ID: rid, Recorded: true})
	if want := []store.Returned{{Dimension: "r", Amount: 8_000}}; err != nil || !cr.Cancelled || !slices.Equal(cr.Returned, want) {
		t.Errorf("Cancel = %+v, %v; want cancelled, %v", cr, err, want)
	}

	// A waiter on the upgraded concurrent bucket is not overtaken by the
	// version-3 acquire when a slot frees.
	acq := func(id store.LeaseID, queue time.Duration) store.AcquireResult {
		t.Helper()
		var res store.AcquireResult
		if err := s.Acquire(ctx, &store.AcquireRequest{Now: at6, Items: []store.Item{{Dimension: "c"}}, ID: id, TTL: time.Hour, Queue: queue}, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	other, waiter := store.NewLeaseID(), store.NewLeaseID()
	if !acq(other, 0).Granted {
		t.Fatal("the second slot was denied")
	}
	if res := acq(waiter, time.Minute); res.Granted || res.Ahead != 0 {
		t.Fatalf("waiter: %+v; want denied at the head", res)
	}
	if rr, err := s.Release(ctx, store.ReleaseRequest{Now: at6, ID: other}); err != nil || !rr.Released {
		t.Fatalf("Release = %+v, %v", rr, err)
	}
	if oldAcquire(t, pool, sch, 7*time.Second, store.NewLeaseID(), "c", 1) {
		t.Error("the version-3 acquire overtook a waiter")
	}
	if res := acq(waiter, time.Minute); !res.Granted {
		t.Errorf("waiter at the head with a slot free: %+v; want granted", res)
	}
	if rr, err := s.Release(ctx, store.ReleaseRequest{Now: at6, ID: held}); err != nil || !rr.Released || len(rr.Restored) != 1 {
		t.Errorf("Release of a lease granted before the upgrade = %+v, %v; want it restored", rr, err)
	}

	// Deleting a bucket deletes its queue.
	late := store.NewLeaseID()
	if !acq(store.NewLeaseID(), 0).Granted || acq(late, time.Minute).Granted {
		t.Fatal("want the last slot granted and the next request queued")
	}
	if err := s.DeleteBucket(ctx, store.DeleteBucketRequest{Name: "c"}); err != nil {
		t.Fatal(err)
	}
	put(t, s, store.Bucket{Name: "c", Config: bucket.ConcurrentSlots(2)})
	if st, err := s.Peek(ctx, store.PeekRequest{Now: at6, Dimensions: []string{"c"}}); err != nil || st[0].Waiters != 0 {
		t.Errorf("Peek of the re-created bucket = %+v, %v; want no waiters", st, err)
	}
}
