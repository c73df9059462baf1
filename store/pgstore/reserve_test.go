package pgstore

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
)

// TestOneRoundTripPerReservation: a reservation (granted or denied, with
// or without a record), a cancellation (recorded or not), a dequeue and a
// queued acquisition are each one query, with no prepare, written to the
// server once (after a first call of each that prepares the statement).
func TestOneRoundTripPerReservation(t *testing.T) {
	var cnt counter
	s := countedStore(t, &cnt)
	ctx := context.Background()
	put(t, s, store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
	put(t, s, store.Bucket{Name: "openai#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)})
	put(t, s, store.Bucket{Name: "openai#concurrent", Config: bucket.ConcurrentSlots(1)})
	reserve := func(record bool, items ...store.Item) store.ReserveResult {
		t.Helper()
		var res store.ReserveResult
		req := &store.ReserveRequest{Now: t0, Items: items, ID: store.NewLeaseID(), TTL: time.Minute, MaxWait: time.Minute, Record: record}
		if err := s.Reserve(ctx, req, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	reserve(false, store.Item{Dimension: "openai#rpm"}) // warm up: prepares and caches the statement
	var held store.AcquireResult
	if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "openai#concurrent"}},
		ID: store.NewLeaseID(), TTL: time.Minute}, &held); err != nil || !held.Granted {
		t.Fatalf("Acquire = %+v, %v", held, err)
	}
	var recorded, unrecorded store.ReserveResult
	var recordedID store.LeaseID
	waiter := store.NewLeaseID()
	ops := []struct {
		name string
		call func() error
	}{
		{"reserve", func() error { unrecorded = reserve(false, store.Item{Dimension: "openai#tpm", Cost: 900}); return nil }},
		{"reserve two items with a record", func() error {
			var res store.ReserveResult
			recordedID = store.NewLeaseID()
			req := &store.ReserveRequest{Now: t0, ID: recordedID, TTL: time.Minute, MaxWait: store.MaxReserveWait, Record: true,
				Items: []store.Item{{Dimension: "openai#rpm"}, {Dimension: "openai#tpm", Cost: 200}}}
			err := s.Reserve(ctx, req, &res)
			recorded = res
			return err
		}},
		{"reserve denied", func() error {
			if res := reserve(false, store.Item{Dimension: "openai#tpm", Cost: 1000}); res.Granted {
				t.Errorf("a reservation an hour away was granted: %+v", res)
			}
			return nil
		}},
		{"cancel recorded", func() error {
			_, err := s.Cancel(ctx, store.CancelRequest{Now: t0, ID: recordedID, Recorded: true})
			return err
		}},
		{"cancel unrecorded", func() error {
			_, err := s.Cancel(ctx, store.CancelRequest{Now: t0, ID: store.NewLeaseID(), ValidAt: unrecorded.ValidAt,
				Items: []store.Item{{Dimension: "openai#tpm", Cost: 900}}})
			return err
		}},
		{"queued acquire", func() error {
			var res store.AcquireResult
			return s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "openai#concurrent"}},
				ID: waiter, TTL: time.Minute, Queue: time.Minute}, &res)
		}},
		{"dequeue", func() error {
			return s.Dequeue(ctx, store.DequeueRequest{Now: t0, ID: waiter, Dimensions: []string{"openai#concurrent"}})
		}},
	}
	for _, op := range ops {
		for i := range 2 { // the first call prepares the statement
			q0, p0, w0 := cnt.queries.Load(), cnt.prepares.Load(), cnt.writes.Load()
			if err := op.call(); err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
			q, p, w := cnt.queries.Load()-q0, cnt.prepares.Load()-p0, cnt.writes.Load()-w0
			if i == 1 && (q != 1 || p != 0 || w != 1) {
				t.Errorf("%s: %d queries, %d prepares, %d writes; want 1, 0, 1", op.name, q, p, w)
			}
		}
	}
	if !recorded.Granted || !recorded.Recorded {
		t.Errorf("the recorded reservation: %+v", recorded)
	}
}

// TestReserveServerClock: with the server's clock a reservation is decided
// at the server's time, the request's Now being ignored; its valid
// instant, expiry and lease record follow, and cancelling it gives its
// cost back.
func TestReserveServerClock(t *testing.T) {
	s := newStoreOn(t, pgtest.Pool(t, nil)) // no WithCallerClock
	ctx := context.Background()
	if err := s.PutBucket(ctx, store.PutBucketRequest{Bucket: store.Bucket{Name: "a#rpm", Config: bucket.PerPeriod(bucket.Requests, 1, time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UnixMilli()
	var ar store.AcquireResult
	if err := s.Acquire(ctx, &store.AcquireRequest{Items: []store.Item{{Dimension: "a#rpm"}}, ID: store.NewLeaseID(), TTL: time.Second}, &ar); err != nil || !ar.Granted {
		t.Fatalf("Acquire = %+v, %v", ar, err)
	}
	taken := time.Now().UnixMilli()
	id := store.NewLeaseID()
	req := &store.ReserveRequest{Now: time.Unix(-1, 0), Items: []store.Item{{Dimension: "a#rpm"}}, ID: id, TTL: time.Second,
		MaxWait: 2 * time.Minute, Record: true}
	var res store.ReserveResult
	if err := s.Reserve(ctx, req, &res); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()
	if !res.Granted || !res.Recorded {
		t.Fatalf("Reserve = %+v, want granted and recorded", res)
	}
	// The bucket was emptied at a server time in [before, taken] and earns
	// its token back a minute later.
	valid := res.ValidAt.UnixMilli()
	if valid < before+60_000 || valid > taken+60_000 {
		t.Errorf("ValidAt %d outside [%d, %d]: not a minute after the server emptied the bucket", valid, before+60_000, taken+60_000)
	}
	if d := valid - res.Wait.Milliseconds(); d < before || d > after {
		t.Errorf("decision time %d (ValidAt − Wait) outside the call [%d, %d]", d, before, after)
	}
	// The balance is what was earned since the bucket was emptied (less
	// than a token) minus the token reserved.
	if rem := res.Items[0].Remaining; res.ExpiresAt.UnixMilli() != valid+1000 || rem < -1000 || rem >= 0 {
		t.Errorf("Reserve = %+v; want the lease to expire a second after ValidAt and the balance in [-1000, 0)", res)
	}
	ls, err := s.Leases(ctx, store.LeaseQuery{Dimension: "a#rpm"})
	if err != nil || len(ls) != 1 || ls[0].ID != id || !ls[0].ValidAt.Equal(res.ValidAt) || !ls[0].ExpiresAt.Equal(res.ExpiresAt) {
		t.Fatalf("Leases = %+v, %v; want the reservation's record with its valid instant", ls, err)
	}
	st, err := s.Peek(ctx, store.PeekRequest{Dimensions: []string{"a#rpm"}})
	if err != nil || st[0].ReservedUntil != valid {
		t.Fatalf("Peek = %+v, %v; want ReservedUntil %d", st, err, valid)
	}
	cr, err := s.Cancel(ctx, store.CancelRequest{Now: time.Unix(-1, 0), ID: id, Recorded: true})
	if want := []store.Returned{{Dimension: "a#rpm", Amount: 1000}}; err != nil || !cr.Cancelled || !slices.Equal(cr.Returned, want) {
		t.Errorf("Cancel = %+v, %v; want cancelled, %v returned", cr, err, want)
	}
	if cr, err := s.Cancel(ctx, store.CancelRequest{ID: id, Recorded: true}); err != nil || cr.Cancelled || len(cr.Returned) != 0 {
		t.Errorf("second Cancel = %+v, %v; want nothing", cr, err)
	}
}

// TestQueueServerClock drives a concurrent bucket's waiter queue with the
// server's clock: waiters are served in the order they first queued, a
// one-shot acquisition and a waiter behind others do not overtake them even
// when a slot is free, a grant and a dequeue leave the queue, and Peek
// counts the live tickets. The lease ids are chosen in byte order, so that
// tickets taken within one millisecond still queue in call order.
func TestQueueServerClock(t *testing.T) {
	s := newStoreOn(t, pgtest.Pool(t, nil)) // no WithCallerClock
	ctx := context.Background()
	if err := s.PutBucket(ctx, store.PutBucketRequest{Bucket: store.Bucket{Name: "c", Config: bucket.ConcurrentSlots(1)}}); err != nil {
		t.Fatal(err)
	}
	ids := []store.LeaseID{store.NewLeaseID(), store.NewLeaseID(), store.NewLeaseID(), store.NewLeaseID()}
	slices.SortFunc(ids, func(a, b store.LeaseID) int { return bytes.Compare(a[:], b[:]) })
	holder, w1, w2, w3 := ids[0], ids[1], ids[2], ids[3]
	oneShot := store.LeaseID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	acquire := func(id store.LeaseID, queue time.Duration) store.AcquireResult {
		t.Helper()
		var res store.AcquireResult
		req := &store.AcquireRequest{Items: []store.Item{{Dimension: "c"}}, ID: id, TTL: time.Minute, Queue: queue}
		if err := s.Acquire(ctx, req, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	waiters := func() int {
		t.Helper()
		st, err := s.Peek(ctx, store.PeekRequest{Dimensions: []string{"c"}})
		if err != nil {
			t.Fatal(err)
		}
		return st[0].Waiters
	}
	release := func(id store.LeaseID) {
		t.Helper()
		if rr, err := s.Release(ctx, store.ReleaseRequest{ID: id}); err != nil || !rr.Released {
			t.Fatalf("Release = %+v, %v", rr, err)
		}
	}
	if res := acquire(holder, 0); !res.Granted {
		t.Fatalf("holder denied: %+v", res)
	}
	for i, id := range []store.LeaseID{w1, w2, w3} {
		if res := acquire(id, time.Minute); res.Granted || res.Ahead != i {
			t.Errorf("waiter %d: granted %v, ahead %d; want denied, %d ahead", i+1, res.Granted, res.Ahead, i)
		}
	}
	if n := waiters(); n != 3 {
		t.Errorf("Waiters = %d, want 3", n)
	}
	release(holder)
	for _, tc := range []struct {
		name  string
		id    store.LeaseID
		queue time.Duration
		ahead int
	}{{"one-shot", oneShot, 0, 3}, {"third waiter", w3, time.Minute, 2}, {"second waiter", w2, time.Minute, 1}} {
		if res := acquire(tc.id, tc.queue); res.Granted || res.Ahead != tc.ahead {
			t.Errorf("%s with a slot free: granted %v, ahead %d; want denied, %d ahead", tc.name, res.Granted, res.Ahead, tc.ahead)
		}
	}
	if res := acquire(w1, time.Minute); !res.Granted || res.Ahead != 0 {
		t.Fatalf("first waiter: %+v, want granted", res)
	}
	if n := waiters(); n != 2 {
		t.Errorf("Waiters after the head's grant = %d, want 2", n)
	}
	if err := s.Dequeue(ctx, store.DequeueRequest{ID: w2, Dimensions: []string{"c", "missing"}}); err != nil {
		t.Fatal(err)
	}
	if n := waiters(); n != 1 {
		t.Errorf("Waiters after a dequeue = %d, want 1", n)
	}
	release(w1)
	if res := acquire(w3, time.Minute); !res.Granted {
		t.Errorf("third waiter, now at the head with a slot free: %+v, want granted", res)
	}
	if n := waiters(); n != 0 {
		t.Errorf("Waiters at the end = %d, want 0", n)
	}
}
