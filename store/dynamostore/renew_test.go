package dynamostore

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// TestRenewInPlace checks that a waiter's renewal of its live ticket
// leaves the row's version alone, so that it fails no other process's
// conditional write, and that a decision which found that ticket dead on
// a row read before the renewal decides again instead of overtaking it.
func TestRenewInPlace(t *testing.T) {
	db := newClient()
	table := newTable(t, db)
	a, b := openStore(t, db, table), openStore(t, db, table) // two processes
	ctx := context.Background()
	conc := store.Bucket{Name: "renew#conc", Config: bucket.ConcurrentSlots(2)}
	put(t, a, t0, conc)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	acquire := func(s *Store, id store.LeaseID, now time.Time, cost int64, queue time.Duration) store.AcquireResult {
		t.Helper()
		var res store.AcquireResult
		req := &store.AcquireRequest{Now: now, Items: []store.Item{{Dimension: conc.Name, Cost: cost}}, ID: id, TTL: time.Minute, Queue: queue}
		if err := s.Acquire(ctx, req, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	version := func() string {
		t.Helper()
		v, _ := getN(rawRow(t, a, conc.Name), attrVersion)
		return v
	}
	holder, big, small := store.NewLeaseID(), store.NewLeaseID(), store.NewLeaseID()
	if res := acquire(a, holder, at(0), 1, 0); !res.Granted {
		t.Fatalf("holder = %+v, want granted", res)
	}
	// big (cost 2) waits first, until 101 ms; small (cost 1) waits behind
	// it, and a remembers the row as its denial wrote it.
	if res := acquire(b, big, at(1), 2, 100*time.Millisecond); res.Granted {
		t.Fatalf("big = %+v, want denied", res)
	}
	if res := acquire(a, small, at(2), 1, 100*time.Millisecond); res.Granted || res.Ahead != 1 {
		t.Fatalf("small = %+v, want denied behind big", res)
	}
	before := version()
	if res := acquire(b, big, at(50), 2, 100*time.Millisecond); res.Granted || res.Ahead != 0 {
		t.Fatalf("big's renewal = %+v, want denied at the head", res)
	}
	if got := version(); got != before {
		t.Errorf("version after a renewal = %s, want %s (unchanged)", got, before)
	}
	if got, want := rawTicket(t, a, conc.Name, big), (store.Ticket{ID: big, At: at(1).UnixMilli(), Expires: at(150).UnixMilli(), Cost: 2}); got != want {
		t.Errorf("big's ticket = %+v, want %+v", got, want)
	}
	// At 120 ms a's remembered row shows big's ticket dead and a slot free
	// for small; the table has it live until 150 ms, ahead of small.
	if res := acquire(a, small, at(120), 1, 100*time.Millisecond); res.Granted || res.Ahead != 1 {
		t.Errorf("small at 120 ms = %+v, want denied behind big's renewed ticket", res)
	}
}

// rawTicket returns id's ticket in a row's waiters map as stored.
func rawTicket(t *testing.T, s *Store, name string, id store.LeaseID) store.Ticket {
	t.Helper()
	bi, err := decodeBucket(rawRow(t, s, name))
	if err != nil {
		t.Fatal(err)
	}
	return bi.waiters[id.String()]
}
