package contract_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestDefaults(t *testing.T) {
	req := store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "a#rpm"}}, ID: store.NewLeaseID(), TTL: time.Second}
	if err := contract.Acquire(&req); err != nil || req.Poll != store.DefaultPoll {
		t.Errorf("Acquire: poll = %v, err = %v; want %v, nil", req.Poll, err, store.DefaultPoll)
	}
	rr := store.ReconcileRequest{Now: t0}
	if err := contract.Reconcile(&rr); err != nil || rr.Limit != store.DefaultReconcileLimit {
		t.Errorf("Reconcile: limit = %d, err = %v; want %d, nil", rr.Limit, err, store.DefaultReconcileLimit)
	}
}

func TestRejects(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		field string
	}{
		{"reconcile limit", contract.Reconcile(&store.ReconcileRequest{Now: t0, Limit: -1}), "limit"},
		{"lease limit", contract.Leases(store.LeaseQuery{Now: t0, Limit: -1}), "limit"},
		{"release id", contract.Release(store.ReleaseRequest{Now: t0}), "lease_id"},
		{"peek none", contract.Peek(store.PeekRequest{Now: t0}), "dimensions"},
		{"extend ttl", contract.Extend(store.ExtendRequest{Now: t0, ID: store.NewLeaseID()}), "ttl"},
	}
	for _, tt := range tests {
		var fe *bucket.FieldError
		if !errors.As(tt.err, &fe) || fe.Field != tt.field {
			t.Errorf("%s: err = %v, want a *FieldError on %q", tt.name, tt.err, tt.field)
		}
	}
}

func TestCheckedSortsAndTruncates(t *testing.T) {
	ctx := context.Background()
	s := contract.Checked(memstore.New())
	if contract.Checked(s) != s || contract.Unwrap(s) == s {
		t.Fatal("Checked is not idempotent or Unwrap does not unwrap")
	}
	for _, name := range []string{"c#conc", "a#conc", "b#conc"} {
		if err := s.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: store.Bucket{Name: name, Config: bucket.ConcurrentSlots(5)}}); err != nil {
			t.Fatal(err)
		}
	}
	bs, err := s.ListBuckets(ctx, store.ListBucketsRequest{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bs {
		got = append(got, b.Name)
	}
	if want := []string{"a#conc", "b#conc", "c#conc"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("ListBuckets = %v, want %v", got, want)
	}
	var first time.Time
	for i, ttl := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second} {
		req := store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "a#conc", Cost: 1}}, ID: store.NewLeaseID(), TTL: ttl}
		var res store.AcquireResult
		if err := s.Acquire(ctx, &req, &res); err != nil || !res.Granted {
			t.Fatal(err, res.Granted)
		}
		if i == 1 {
			first = res.ExpiresAt
		}
	}
	ls, err := s.Leases(ctx, store.LeaseQuery{Now: t0, Limit: 2})
	if err != nil || len(ls) != 2 || !ls[0].ExpiresAt.Equal(first) || ls[1].ExpiresAt.Before(ls[0].ExpiresAt) {
		t.Errorf("Leases(limit 2) = %+v, %v; want the two earliest, by expiry", ls, err)
	}
}
