package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

var t0 = time.UnixMilli(1_700_000_000_000)

func TestMigrateIdempotent(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	v, err := s.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion() || v < 2 {
		t.Fatalf("Version = %d, want %d (>= 2)", v, SchemaVersion())
	}
}

func TestAcquireBasics(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	put(t, s, store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 2, time.Minute)})
	req := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "openai#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute}
	var res store.AcquireResult
	for i := range 2 {
		req.ID = store.NewLeaseID()
		if err := s.Acquire(ctx, req, &res); err != nil {
			t.Fatal(err)
		}
		if !res.Granted || res.Recorded || res.Items[0].Remaining != int64(1-i)*1000 {
			t.Fatalf("acquire %d: %+v", i, res)
		}
	}
	req.ID = store.NewLeaseID()
	if err := s.Acquire(ctx, req, &res); err != nil {
		t.Fatal(err)
	}
	if res.Granted || res.RetryIn != 30*time.Second {
		t.Fatalf("third acquire: %+v, want denied for 30s", res)
	}
}
