package dynamostore

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// acquireOnce acquires items at now and fails the test unless granted.
func acquireOnce(t testing.TB, s *Store, now time.Time, record bool, items ...store.Item) store.AcquireResult {
	t.Helper()
	var res store.AcquireResult
	req := &store.AcquireRequest{Now: now, Items: items, ID: store.NewLeaseID(), Caller: "test", TTL: time.Minute, Record: record}
	if err := s.Acquire(context.Background(), req, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRoundTrips counts HTTP requests per acquisition on both paths: the
// fast path needs one when uncontended (after the first, which reads the
// row), the read-then-transact path two (read, then transaction), and a denial on
// either writes nothing.
func TestRoundTrips(t *testing.T) {
	tp := newTap()
	db := tp.client()
	table := newTable(t, db)
	fast := openStore(t, db, table)
	readFirst := openStore(t, db, table, WithReadThenTransact())
	put(t, fast, t0, store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 1000, time.Minute)})
	put(t, fast, t0, store.Bucket{Name: "openai#tpm", Config: bucket.PerPeriod(bucket.Tokens, 100000, time.Minute)})
	put(t, fast, t0, store.Bucket{Name: "eleven#concurrent", Config: bucket.ConcurrentSlots(100)})
	put(t, fast, t0, store.Bucket{Name: "tiny#rpm", Config: bucket.PerPeriod(bucket.Requests, 1, time.Hour)})
	rpm := store.Item{Dimension: "openai#rpm", Cost: 1}
	tpm := store.Item{Dimension: "openai#tpm", Cost: 100}
	conc := store.Item{Dimension: "eleven#concurrent", Cost: 1}

	count := func(name string, want int, f func()) {
		t.Helper()
		tp.reset()
		f()
		ops, _, _ := tp.snapshot()
		if got := tp.total(); got != want {
			t.Errorf("%s: %d round trips %v, want %d", name, got, ops, want)
		}
	}
	count("fast, cold cache", 2, func() { acquireOnce(t, fast, t0, false, rpm) })
	for i := range 3 {
		count("fast, warm", 1, func() { acquireOnce(t, fast, t0.Add(time.Duration(i)*time.Millisecond), false, rpm) })
	}
	acquireOnce(t, fast, t0, false, rpm, tpm) // warm tpm
	count("fast, two dimensions", 1, func() { acquireOnce(t, fast, t0, false, rpm, tpm) })
	acquireOnce(t, fast, t0, false, conc)
	count("fast, concurrent (lease record)", 1, func() { acquireOnce(t, fast, t0, false, conc) })
	count("fast, recorded", 1, func() { acquireOnce(t, fast, t0, true, rpm) })
	count("readfirst", 2, func() { acquireOnce(t, readFirst, t0, false, rpm) })
	count("readfirst, two dimensions", 2, func() { acquireOnce(t, readFirst, t0, false, rpm, tpm) })
	// Another writer makes the fast path's row stale: the lost condition
	// returns the row (ALL_OLD) and the retry needs no read.
	acquireOnce(t, readFirst, t0, false, rpm)
	count("fast, stale row", 2, func() { acquireOnce(t, fast, t0, false, rpm) })

	tiny := store.Item{Dimension: "tiny#rpm", Cost: 1}
	acquireOnce(t, readFirst, t0, false, tiny)
	deny := func(s *Store) {
		var res store.AcquireResult
		req := &store.AcquireRequest{Now: t0, Items: []store.Item{tiny}, ID: store.NewLeaseID(), TTL: time.Minute}
		if err := s.Acquire(context.Background(), req, &res); err != nil || res.Granted {
			t.Fatalf("want a denial: %+v %v", res, err)
		}
	}
	count("readfirst, denial (read only)", 1, func() { deny(readFirst) })
	count("fast, denial (read only)", 1, func() { deny(fast) })
	ops, _, _ := tp.snapshot()
	if ops["UpdateItem"]+ops["TransactWriteItems"] != 0 {
		t.Errorf("a denial wrote: %v", ops)
	}
}
