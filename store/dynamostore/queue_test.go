package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// TestReservationRow checks the layout of a reservation: the bucket row's
// reserved_until_ms (absent from a bucket never reserved), the lease
// items' valid_ms and TTL counted from the valid instant, Leases' ValidAt,
// and the record's deletion by Cancel, which refuses an acquisition's
// lease.
func TestReservationRow(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	tpm := store.Bucket{Name: "row#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)}
	rpm := store.Bucket{Name: "row#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)}
	put(t, s, t0, tpm)
	put(t, s, t0, rpm)
	if _, ok := rawRow(t, s, tpm.Name)[attrReserved]; ok {
		t.Fatal("a new bucket has reserved_until_ms")
	}
	var res store.ReserveResult
	drain := &store.ReserveRequest{Now: t0, Items: []store.Item{{Dimension: tpm.Name, Cost: 1000}}, ID: store.NewLeaseID(), TTL: time.Minute}
	if err := s.Reserve(ctx, drain, &res); err != nil || !res.Granted || res.Wait != 0 {
		t.Fatalf("drain = %+v, %v", res, err)
	}
	id := store.NewLeaseID()
	req := &store.ReserveRequest{Now: t0, Items: []store.Item{{Dimension: tpm.Name, Cost: 500}}, ID: id, TTL: 10 * time.Second, MaxWait: time.Minute, Record: true}
	if err := s.Reserve(ctx, req, &res); err != nil || !res.Granted || !res.Recorded || res.Wait != 30*time.Second {
		t.Fatalf("reserve = %+v, %v; want granted, recorded, valid in 30s", res, err)
	}
	valid := t0.Add(30 * time.Second).UnixMilli()
	if got, _ := getN(rawRow(t, s, tpm.Name), attrReserved); got != itoa(int(valid)) {
		t.Errorf("reserved_until_ms = %q, want %d", got, valid)
	}
	item := rawLease(t, s, tpm.Name, id)
	if got, _ := getN(item, attrValidMs); got != itoa(int(valid)) {
		t.Errorf("valid_ms = %q, want %d", got, valid)
	}
	if got, _ := getN(item, attrTTL); got != itoa(int((valid+10_000+999)/1000)) {
		t.Errorf("ttl = %q, want the valid instant + TTL in seconds", got)
	}
	ls, err := s.Leases(ctx, store.LeaseQuery{Now: t0})
	if err != nil || len(ls) != 1 || ls[0].ValidAt.UnixMilli() != valid || ls[0].ExpiresAt.UnixMilli() != valid+10_000 {
		t.Fatalf("Leases = %+v, %v", ls, err)
	}
	cr, err := s.Cancel(ctx, store.CancelRequest{Now: t0.Add(time.Second), ID: id, Recorded: true})
	if err != nil || !cr.Cancelled || len(cr.Returned) != 1 || cr.Returned[0].Amount != 500_000 {
		t.Fatalf("Cancel = %+v, %v; want 500 tokens back", cr, err)
	}
	if rawLease(t, s, tpm.Name, id) != nil || rawRow(t, s, indexPK(id)) != nil {
		t.Error("Cancel left the reservation's lease or index item")
	}
	if cr, err = s.Cancel(ctx, store.CancelRequest{Now: t0.Add(time.Second), ID: id, Recorded: true}); err != nil || cr.Cancelled {
		t.Errorf("second Cancel = %+v, %v; want nothing", cr, err)
	}
	lease := store.NewLeaseID()
	var ar store.AcquireResult
	if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: rpm.Name}}, ID: lease, TTL: time.Minute, Record: true}, &ar); err != nil || !ar.Granted {
		t.Fatalf("acquire = %+v, %v", ar, err)
	}
	if _, err := s.Cancel(ctx, store.CancelRequest{Now: t0, ID: lease, Recorded: true}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Cancel of an acquisition's lease = %v, want ErrInvalid", err)
	}
	if _, ok := rawRow(t, s, rpm.Name)[attrReserved]; ok {
		t.Error("an acquisition wrote reserved_until_ms")
	}
}

// TestWaiterQueueRow checks the waiters map of a concurrent row: a queued
// denial takes a ticket, a one-shot acquisition does not overtake it, the
// queue refuses one ticket more than WithMaxWaitersPerBucket with a
// *WaiterLimitError, Dequeue removes a ticket and a grant removes the
// grantee's.
func TestWaiterQueueRow(t *testing.T) {
	s := newStore(t, WithMaxWaitersPerBucket(2))
	ctx := context.Background()
	conc := store.Bucket{Name: "row#conc", Config: bucket.ConcurrentSlots(1)}
	put(t, s, t0, conc)
	step := 0
	acquire := func(id store.LeaseID, queue time.Duration) (store.AcquireResult, error) {
		var res store.AcquireResult
		step++ // a millisecond later each time: tickets are in order of first request
		err := s.Acquire(ctx, &store.AcquireRequest{Now: t0.Add(time.Duration(step) * time.Millisecond), Items: []store.Item{{Dimension: conc.Name}}, ID: id, TTL: time.Minute, Queue: queue}, &res)
		return res, err
	}
	holder, a, b, c := store.NewLeaseID(), store.NewLeaseID(), store.NewLeaseID(), store.NewLeaseID()
	if res, err := acquire(holder, 0); err != nil || !res.Granted {
		t.Fatalf("holder = %+v, %v", res, err)
	}
	for i, id := range []store.LeaseID{a, b} {
		if res, err := acquire(id, time.Second); err != nil || res.Granted || res.Ahead != i {
			t.Fatalf("waiter %d = %+v, %v; want denied with %d ahead", i, res, err, i)
		}
	}
	if got := waiters(t, s, conc.Name); len(got) != 2 {
		t.Fatalf("waiters = %v, want a and b", got)
	}
	var le *WaiterLimitError
	if _, err := acquire(c, time.Second); !errors.As(err, &le) || !errors.Is(err, ErrTooManyWaiters) || le.Limit != 2 {
		t.Fatalf("third waiter = %v, want a *WaiterLimitError", err)
	}
	if err := s.Dequeue(ctx, store.DequeueRequest{Now: t0.Add(10 * time.Millisecond), ID: a, Dimensions: []string{conc.Name}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, store.ReleaseRequest{Now: t0.Add(10 * time.Millisecond), ID: holder}); err != nil {
		t.Fatal(err)
	}
	if res, err := acquire(c, 0); err != nil || res.Granted || res.Ahead != 1 {
		t.Fatalf("one-shot behind b = %+v, %v; want denied with 1 ahead", res, err)
	}
	if res, err := acquire(b, time.Second); err != nil || !res.Granted {
		t.Fatalf("b at the head = %+v, %v; want granted", res, err)
	}
	if got := waiters(t, s, conc.Name); len(got) != 0 {
		t.Errorf("waiters after b's grant = %v, want none", got)
	}
	if _, err := New(newClient(), "sluice-x", WithMaxWaitersPerBucket(0)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("WithMaxWaitersPerBucket(0) = %v, want an error naming max_waiters_per_bucket", err)
	}
}

// rawLease reads a lease item as stored, nil when there is none.
func rawLease(t *testing.T, s *Store, dim string, id store.LeaseID) map[string]types.AttributeValue {
	t.Helper()
	return rawRow(t, s, leasePK(dim, id))
}

// waiters returns the uuids in a row's waiters map.
func waiters(t *testing.T, s *Store, name string) []string {
	t.Helper()
	m, _ := rawRow(t, s, name)[attrWaiters].(*types.AttributeValueMemberM)
	if m == nil {
		return nil
	}
	out := make([]string, 0, len(m.Value))
	for k := range m.Value {
		out = append(out, k)
	}
	return out
}

// TestReserveRoundTrips pins the requests the new operations send
// (docs/stores/dynamodb.md, round trips per operation).
func TestReserveRoundTrips(t *testing.T) {
	tp := newTap()
	db := tp.client()
	table := newTable(t, db)
	s := openStore(t, db, table)
	ctx := context.Background()
	put(t, s, t0, store.Bucket{Name: "rt#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)})
	put(t, s, t0, store.Bucket{Name: "rt#conc", Config: bucket.ConcurrentSlots(1)})
	count := func(name string, want map[string]int, f func() error) {
		t.Helper()
		tp.reset()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		ops, _, _ := tp.snapshot()
		if fmt.Sprint(ops) != fmt.Sprint(want) {
			t.Errorf("%s: requests %v, want %v", name, ops, want)
		}
	}
	var res store.ReserveResult
	count("reserve, cold", map[string]int{"TransactGetItems": 1, "TransactWriteItems": 1}, func() error {
		return s.Reserve(ctx, &store.ReserveRequest{Now: t0, Items: []store.Item{{Dimension: "rt#tpm", Cost: 600}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
	})
	var pending store.ReserveResult
	req := &store.ReserveRequest{Now: t0, Items: []store.Item{{Dimension: "rt#tpm", Cost: 600}}, ID: store.NewLeaseID(), TTL: time.Minute, MaxWait: time.Minute}
	count("reserve, warm, pending", map[string]int{"TransactWriteItems": 1}, func() error { return s.Reserve(ctx, req, &pending) })
	if !pending.Granted || pending.Wait == 0 {
		t.Fatalf("pending reservation = %+v", pending)
	}
	// A one-item transaction: its token makes an SDK resend apply once
	// (writeDelta).
	count("cancel, unrecorded, warm", map[string]int{"TransactWriteItems": 1}, func() error {
		_, err := s.Cancel(ctx, store.CancelRequest{Now: t0, ID: req.ID, Items: []store.Item{{Dimension: "rt#tpm", Cost: 600}}, ValidAt: pending.ValidAt})
		return err
	})
	var ar store.AcquireResult
	acq := func(id store.LeaseID, q time.Duration) func() error {
		return func() error {
			return s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "rt#conc"}}, ID: id, TTL: time.Minute, Queue: q}, &ar)
		}
	}
	if err := acq(store.NewLeaseID(), 0)(); err != nil || !ar.Granted {
		t.Fatalf("holder = %+v, %v", ar, err)
	}
	w := store.NewLeaseID()
	// A denial on a remembered row reads again (it is never trusted), with
	// the lease id's index item, then takes its ticket.
	count("queued denial", map[string]int{"TransactGetItems": 1, "UpdateItem": 1}, acq(w, time.Second))
	count("dequeue", map[string]int{"GetItem": 1, "UpdateItem": 1}, func() error {
		return s.Dequeue(ctx, store.DequeueRequest{Now: t0, ID: w, Dimensions: []string{"rt#conc"}})
	})
	count("dequeue, nothing to do", map[string]int{"GetItem": 1}, func() error {
		return s.Dequeue(ctx, store.DequeueRequest{Now: t0, ID: w, Dimensions: []string{"rt#conc"}})
	})
}
