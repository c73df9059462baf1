package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

func reserve(t *testing.T, s store.Queuer, req *store.ReserveRequest) *store.ReserveResult {
	t.Helper()
	var res store.ReserveResult
	if err := s.Reserve(context.Background(), req, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// TestReserveRoundTrips counts round trips: one per reservation, per
// cancellation (recorded, from the process that reserved, or not), per
// dequeue on one vendor and per queued acquisition, once the scripts are
// cached.
func TestReserveRoundTrips(t *testing.T) {
	c := newClient(t)
	s := newStoreOn(t, c)
	ctx := context.Background()
	put(t, s, t0, store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 1, time.Minute)})
	put(t, s, t0, store.Bucket{Name: "openai#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)})
	put(t, s, t0, store.Bucket{Name: "openai#concurrent", Config: bucket.ConcurrentSlots(1)})
	// Load every script once.
	id := store.NewLeaseID()
	reserve(t, s, &store.ReserveRequest{Now: t0, ID: id, TTL: time.Minute, MaxWait: time.Hour, Record: true,
		Items: []store.Item{{Dimension: "openai#tpm", Cost: 1}}})
	if _, err := s.Cancel(ctx, store.CancelRequest{Now: t0, ID: id, Recorded: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, store.CancelRequest{Now: t0, ID: id, Items: []store.Item{{Dimension: "openai#tpm", Cost: 1}}, ValidAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Dequeue(ctx, store.DequeueRequest{Now: t0, ID: id, Dimensions: []string{"openai#concurrent"}}); err != nil {
		t.Fatal(err)
	}
	acquire(t, s, t0, store.Item{Dimension: "openai#concurrent"}) // holds the slot

	h := &countHook{}
	c.AddHook(h)
	for i := range 5 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		id := store.NewLeaseID()
		r := reserve(t, s, &store.ReserveRequest{Now: now, ID: id, TTL: time.Minute, MaxWait: time.Hour, Record: i%2 == 0,
			Items: []store.Item{{Dimension: "openai#rpm"}, {Dimension: "openai#tpm", Cost: 300}}})
		if !r.Granted {
			t.Fatalf("reservation %d: %+v", i, r)
		}
		req := store.CancelRequest{Now: now, ID: id, Recorded: r.Recorded}
		if !r.Recorded {
			req.Items, req.ValidAt = []store.Item{{Dimension: "openai#rpm", Cost: 1}, {Dimension: "openai#tpm", Cost: 300}}, r.ValidAt
		}
		if cr, err := s.Cancel(ctx, req); err != nil {
			t.Fatalf("cancel %d: %+v %v", i, cr, err)
		}
		var ar store.AcquireResult
		if err := s.Acquire(ctx, &store.AcquireRequest{Now: now, ID: id, TTL: time.Minute, Poll: time.Second, Queue: time.Second,
			Items: []store.Item{{Dimension: "openai#concurrent"}}}, &ar); err != nil || ar.Granted {
			t.Fatalf("queued acquisition %d: %+v %v", i, ar, err)
		}
		if err := s.Dequeue(ctx, store.DequeueRequest{Now: now, ID: id, Dimensions: []string{"openai#concurrent"}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.n.Load(); n != 20 {
		t.Errorf("5 × (reserve, cancel, queued acquire, dequeue) took %d round trips, want 20", n)
	}
}

// TestQueueKeyLayout pins the waiter queue's keys and the reservation
// field: tickets by place and by expiry next to the bucket, in its slot,
// the latest valid instant in the bucket hash, live tickets counted by
// Peek, and the queue deleted with its bucket.
func TestQueueKeyLayout(t *testing.T) {
	c := newClient(t)
	s := newStoreOn(t, c, WithPrefix("qlayout:"))
	ctx := context.Background()
	t.Cleanup(func() { c.Del(context.Background(), mustKeys(t, c, "qlayout:*")...) })
	put(t, s, t0, store.Bucket{Name: "eleven#concurrent", Config: bucket.ConcurrentSlots(1)})
	put(t, s, t0, store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 1, time.Minute)})
	acquire(t, s, t0, store.Item{Dimension: "eleven#concurrent"})
	b, w := store.NewLeaseID(), store.NewLeaseID()
	for i, id := range []store.LeaseID{b, w} {
		var res store.AcquireResult
		err := s.Acquire(ctx, &store.AcquireRequest{Now: t0.Add(time.Duration(i+1) * time.Millisecond), ID: id, TTL: time.Minute,
			Poll: time.Second, Queue: 5 * time.Second, Items: []store.Item{{Dimension: "eleven#concurrent"}}}, &res)
		if err != nil || res.Granted || res.Ahead != i {
			t.Fatalf("waiter %d: %+v %v, want a denial with %d ahead", i, res, err, i)
		}
	}
	place, err := c.ZRangeWithScores(ctx, "qlayout:{eleven}:q#concurrent", 0, -1).Result()
	if err != nil || len(place) != 2 || place[0].Member != b.String() || int64(place[0].Score) != t0.UnixMilli()+1 ||
		place[1].Member != w.String() || int64(place[1].Score) != t0.UnixMilli()+2 {
		t.Errorf("tickets by place: %+v %v", place, err)
	}
	exp, err := c.ZScore(ctx, "qlayout:{eleven}:qx#concurrent", b.String()).Result()
	if err != nil || int64(exp) != t0.UnixMilli()+5001 {
		t.Errorf("ticket expiry %v %v, want %d", int64(exp), err, t0.UnixMilli()+5001)
	}
	r := reserve(t, s, &store.ReserveRequest{Now: t0, ID: store.NewLeaseID(), TTL: time.Minute, MaxWait: time.Hour,
		Items: []store.Item{{Dimension: "openai#rpm", Cost: 1}, {Dimension: "openai#rpm", Cost: 1}}[:1]})
	r2 := reserve(t, s, &store.ReserveRequest{Now: t0, ID: store.NewLeaseID(), TTL: time.Minute, MaxWait: time.Hour,
		Items: []store.Item{{Dimension: "openai#rpm"}}})
	if !r.Granted || !r2.Granted || r2.Wait != time.Minute {
		t.Fatalf("reservations: %+v %+v", r, r2)
	}
	if v, _ := c.HGet(ctx, "qlayout:{openai}#rpm", "r").Result(); v != "1700000060000" {
		t.Errorf("reserved field %q, want the second reservation's valid instant", v)
	}
	for _, tc := range []struct {
		at      time.Duration
		waiters int
	}{{2 * time.Millisecond, 2}, {5001 * time.Millisecond, 1}, {5002 * time.Millisecond, 0}} {
		st, err := s.Peek(ctx, store.PeekRequest{Now: t0.Add(tc.at), Dimensions: []string{"eleven#concurrent", "openai#rpm"}})
		if err != nil || st[0].Waiters != tc.waiters || st[1].ReservedUntil != t0.UnixMilli()+60_000 {
			t.Errorf("peek at +%s: %+v %v, want %d waiters", tc.at, st, err, tc.waiters)
		}
	}
	if err := s.DeleteBucket(ctx, store.DeleteBucketRequest{Name: "eleven#concurrent"}); err != nil {
		t.Fatal(err)
	}
	if n := len(mustKeys(t, c, "qlayout:{eleven}:q*")); n != 0 {
		t.Errorf("%d queue keys left after deleting the bucket", n)
	}
}

// TestReserveServerClock checks reservations and queues on the server's
// TIME: Now is ignored, the valid instant is a minute after the server's
// now for a drained 1-per-minute bucket, a cancellation gives the token
// back, and waiters are served in the order they queued.
func TestReserveServerClock(t *testing.T) {
	s, err := New(newClient(t), WithPrefix(uniquePrefix()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var zero time.Time
	put(t, s, zero, store.Bucket{Name: "svc#rpm", Config: bucket.PerPeriod(bucket.Requests, 1, time.Minute)})
	put(t, s, zero, store.Bucket{Name: "svc#concurrent", Config: bucket.ConcurrentSlots(1)})
	before := time.Now()
	first := reserve(t, s, &store.ReserveRequest{Now: zero, ID: store.NewLeaseID(), TTL: time.Minute, MaxWait: time.Hour,
		Items: []store.Item{{Dimension: "svc#rpm"}}})
	id := store.NewLeaseID()
	second := reserve(t, s, &store.ReserveRequest{Now: zero, ID: id, TTL: time.Minute, MaxWait: time.Hour, Record: true,
		Items: []store.Item{{Dimension: "svc#rpm"}}})
	if !first.Granted || first.Wait != 0 || !second.Granted || !second.Recorded || second.ValidAt.Before(before.Add(time.Minute-time.Second)) ||
		second.Wait > time.Minute || !second.ExpiresAt.Equal(second.ValidAt.Add(time.Minute)) {
		t.Fatalf("server-clock reservations: %+v %+v", first, second)
	}
	ls, err := s.Leases(ctx, store.LeaseQuery{Now: zero})
	if err != nil || len(ls) != 1 || !ls[0].ValidAt.Equal(second.ValidAt) {
		t.Fatalf("reservation record: %+v %v", ls, err)
	}
	cr, err := s.Cancel(ctx, store.CancelRequest{Now: zero, ID: id, Recorded: true})
	if err != nil || !cr.Cancelled || len(cr.Returned) != 1 || cr.Returned[0].Amount != 1000 {
		t.Fatalf("cancel: %+v %v", cr, err)
	}
	acquire(t, s, zero, store.Item{Dimension: "svc#concurrent"})
	ls, err = s.Leases(ctx, store.LeaseQuery{Now: zero, Dimension: "svc#concurrent"})
	if err != nil || len(ls) != 1 {
		t.Fatalf("holder's record: %+v %v", ls, err)
	}
	// Waiters that queue within one millisecond of the server's clock go
	// by id: each has at most the earlier ones ahead.
	var waiters []*store.AcquireRequest
	for i := range 3 {
		req := &store.AcquireRequest{Now: zero, ID: store.NewLeaseID(), TTL: time.Minute, Poll: time.Second,
			Queue: time.Minute, Items: []store.Item{{Dimension: "svc#concurrent"}}}
		var res store.AcquireResult
		if err := s.Acquire(ctx, req, &res); err != nil || res.Granted || res.Ahead > i {
			t.Fatalf("waiter %d: %+v %v, want at most %d ahead", i, res, err, i)
		}
		waiters = append(waiters, req)
	}
	if st, err := s.Peek(ctx, store.PeekRequest{Now: zero, Dimensions: []string{"svc#concurrent"}}); err != nil || st[0].Waiters != 3 {
		t.Fatalf("peek: %+v %v, want 3 waiters", st, err)
	}
	if _, err := s.Release(ctx, store.ReleaseRequest{Now: zero, ID: ls[0].ID}); err != nil {
		t.Fatal(err)
	}
	granted := 0
	for _, req := range waiters { // the head gets the free slot, whatever the order they ask in
		var res store.AcquireResult
		if err := s.Acquire(ctx, req, &res); err != nil {
			t.Fatal(err)
		}
		if res.Granted {
			granted++
		}
	}
	if granted != 1 {
		t.Errorf("%d waiters were granted the one free slot, want 1", granted)
	}
}

// TestReserveClusterSlots runs reservations, cancellations and queues on
// the real Cluster with one slot per vendor: a cross-vendor reservation
// fails with ErrCrossSlot before any command is sent, a recorded
// reservation is cancelled by another process that never saw it, and a
// dequeue spans vendors.
func TestReserveClusterSlots(t *testing.T) {
	c := newClusterClient(t)
	s := newStoreOn(t, c)
	ctx := context.Background()
	put(t, s, t0, store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 1, time.Minute)})
	put(t, s, t0, store.Bucket{Name: "anthropic#rpm", Config: bucket.PerPeriod(bucket.Requests, 1, time.Minute)})
	put(t, s, t0, store.Bucket{Name: "anthropic#concurrent", Config: bucket.ConcurrentSlots(1)})
	put(t, s, t0, store.Bucket{Name: "openai#concurrent", Config: bucket.ConcurrentSlots(1)})
	h := &countHook{}
	c.AddHook(h)
	var res store.ReserveResult
	err := s.Reserve(ctx, &store.ReserveRequest{Now: t0, ID: store.NewLeaseID(), TTL: time.Minute,
		Items: []store.Item{{Dimension: "openai#rpm"}, {Dimension: "anthropic#rpm"}}}, &res)
	if !errors.Is(err, ErrCrossSlot) || h.n.Load() != 0 {
		t.Fatalf("cross-vendor reservation: %v after %d commands, want ErrCrossSlot before any", err, h.n.Load())
	}
	reserve(t, s, &store.ReserveRequest{Now: t0, ID: store.NewLeaseID(), TTL: time.Minute, Items: []store.Item{{Dimension: "anthropic#rpm"}}})
	id := store.NewLeaseID()
	r := reserve(t, s, &store.ReserveRequest{Now: t0, ID: id, TTL: time.Minute, MaxWait: time.Hour, Record: true,
		Items: []store.Item{{Dimension: "anthropic#rpm"}}})
	if !r.Granted || r.Wait != time.Minute {
		t.Fatalf("pending reservation: %+v", r)
	}
	other := newStoreOn(t, c, WithPrefix(s.prefix)) // no lease cache
	cr, err := other.Cancel(ctx, store.CancelRequest{Now: t0.Add(time.Second), ID: id, Recorded: true})
	if err != nil || !cr.Cancelled || len(cr.Returned) != 1 {
		t.Fatalf("cancel from another process: %+v %v", cr, err)
	}
	waiter := store.NewLeaseID()
	for _, d := range []string{"anthropic#concurrent", "openai#concurrent"} {
		acquire(t, s, t0, store.Item{Dimension: d})
		var ar store.AcquireResult
		if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, ID: waiter, TTL: time.Minute, Poll: time.Second, Queue: time.Minute,
			Items: []store.Item{{Dimension: d}}}, &ar); err != nil || ar.Granted {
			t.Fatalf("queued on %s: %+v %v", d, ar, err)
		}
	}
	if err := s.Dequeue(ctx, store.DequeueRequest{Now: t0, ID: waiter, Dimensions: []string{"anthropic#concurrent", "openai#concurrent"}}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"anthropic#concurrent", "openai#concurrent"}})
	if err != nil || st[0].Waiters != 0 || st[1].Waiters != 0 {
		t.Fatalf("waiters after the dequeue: %+v %v", st, err)
	}
}
