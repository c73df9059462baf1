package redisstore

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// deadPurgeMax is how many dead waiter tickets one acquisition removes
// from a queue (acquire.lua).
const deadPurgeMax = 500

// TestDeadTicketBacklogPurgedInSteps fills a concurrent dimension's queue
// with a backlog of dead tickets ahead of two live waiters (written
// directly in Redis) and checks that each acquisition removes at most
// deadPurgeMax of them, that the dead tickets still count as ahead until
// they are removed, and that the live waiters are then served in order.
// With SLUICE_LONG=1 the backlog is 80,077 tickets; the first call's time
// is logged for docs/stores/redis.md.
func TestDeadTicketBacklogPurgedInSteps(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	const dim = "v#concurrent"
	put(t, s, t0, store.Bucket{Name: dim, Config: bucket.ConcurrentSlots(1)})
	dead := 1_700
	if os.Getenv("SLUICE_LONG") != "" {
		dead = 80_077
	}
	qk, xk, ck := fillDeadTickets(t, s, dead)
	now := t0.UnixMilli()
	first, second := store.NewLeaseID(), store.NewLeaseID()
	for i, id := range []store.LeaseID{first, second} {
		p := s.rdb.Pipeline()
		p.ZAdd(ctx, qk, redis.Z{Score: float64(now - 10 + int64(i)), Member: id.String()})
		p.ZAdd(ctx, xk, redis.Z{Score: float64(now + 60_000), Member: id.String()})
		p.HSet(ctx, ck, id.String(), 1)
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	try := func(id store.LeaseID) store.AcquireResult {
		t.Helper()
		var r store.AcquireResult
		req := store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: dim, Cost: 1}}, ID: id, TTL: time.Minute,
			Poll: time.Second, Queue: time.Minute}
		if err := s.Acquire(ctx, &req, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	left := dead
	for call := 0; ; call++ {
		id := first
		if call == 0 {
			id = second // the second waiter's call purges too, and is not served
		}
		start := time.Now()
		r := try(id)
		took := time.Since(start)
		if call == 0 {
			t.Logf("first call with %d dead tickets: %v", dead, took)
		}
		live := 2 - boolInt(r.Granted && id == first)
		removed := left - (int(s.rdb.ZCard(ctx, xk).Val()) - live)
		if want := min(deadPurgeMax, left); removed != want {
			t.Fatalf("call %d removed %d dead tickets of %d, want %d", call, removed, left, want)
		}
		left -= removed
		if r.Granted {
			if id != first || left != 0 {
				t.Fatalf("call %d granted %v with %d dead tickets left, want the first waiter once none is left", call, id, left)
			}
			break
		}
		if wantAhead := left + boolInt(id == second); r.Ahead != wantAhead {
			t.Errorf("call %d: Ahead %d, want %d (the dead tickets left count until removed)", call, r.Ahead, wantAhead)
		}
		if call > dead/deadPurgeMax+2 {
			t.Fatalf("the first waiter was not served after %d calls", call)
		}
	}
	if r := try(second); r.Granted {
		t.Errorf("the second waiter was granted the slot the first holds: %+v", r)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fillDeadTickets writes n dead waiter tickets on v#concurrent's queue,
// directly in Redis, and returns the queue's keys.
func fillDeadTickets(t *testing.T, s *Store, n int) (qk, xk, ck string) {
	t.Helper()
	ctx := context.Background()
	tag := s.vendorTag("v")
	qk, xk, ck = tag+":q#concurrent", tag+":qx#concurrent", tag+":qc#concurrent"
	now := t0.UnixMilli()
	for k := 0; k < n; k += 1000 {
		var places, expiries []redis.Z
		costs := map[string]any{}
		for j := k; j < min(k+1000, n); j++ {
			id := store.NewLeaseID().String()
			places = append(places, redis.Z{Score: float64(now - 100_000 + int64(j)), Member: id})
			expiries = append(expiries, redis.Z{Score: float64(now - 1 - int64(j%50)), Member: id})
			costs[id] = 1
		}
		p := s.rdb.Pipeline()
		p.ZAdd(ctx, qk, places...)
		p.ZAdd(ctx, xk, expiries...)
		p.HSet(ctx, ck, costs)
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return qk, xk, ck
}

// TestDequeuePurgesDeadTicketsInSteps: a waiter giving up removes its own
// ticket and at most deadPurgeMax dead ones, so that a huge backlog never
// blocks the server in one script.
func TestDequeuePurgesDeadTicketsInSteps(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	const dim = "v#concurrent"
	put(t, s, t0, store.Bucket{Name: dim, Config: bucket.ConcurrentSlots(1)})
	const dead = 1_200
	qk, xk, ck := fillDeadTickets(t, s, dead)
	for call, left := 0, dead; left > 0; call++ {
		if err := s.Dequeue(ctx, store.DequeueRequest{Now: t0, ID: store.NewLeaseID(), Dimensions: []string{dim}}); err != nil {
			t.Fatal(err)
		}
		got := []int64{s.rdb.ZCard(ctx, xk).Val(), s.rdb.ZCard(ctx, qk).Val(), s.rdb.HLen(ctx, ck).Val()}
		want := int64(max(left-deadPurgeMax, 0))
		for i, n := range got {
			if n != want {
				t.Fatalf("dequeue %d: key %d holds %d tickets, want %d (at most %d removed per call)", call, i, n, want, deadPurgeMax)
			}
		}
		left = int(want)
	}
}
