package recorder_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/cmd/recorder"
	"github.com/ontopix/sluice/internal/cmd/verify"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// A reservation is logged as a grant at its valid instant, and its
// cancellation as a refund of what came back, at the same instant.
func TestReserveAndCancelAreLoggedAtTheValidInstant(t *testing.T) {
	ctx := context.Background()
	rec := recorder.New(memstore.New())
	now := time.UnixMilli(1_700_000_000_000)
	b := store.Bucket{Name: "api#tps", Config: sluice.PerPeriod(sluice.Tokens, 1000, time.Second)}
	if err := rec.PutBucket(ctx, store.PutBucketRequest{Now: now, Bucket: b, Reset: true}); err != nil {
		t.Fatal(err)
	}
	var ares store.AcquireResult
	areq := &store.AcquireRequest{Now: now, Items: []store.Item{{Dimension: "api#tps", Cost: 1000}}, ID: store.NewLeaseID(), TTL: time.Minute}
	if err := rec.Acquire(ctx, areq, &ares); err != nil || !ares.Granted {
		t.Fatalf("Acquire = %+v, %v", ares, err)
	}
	var res store.ReserveResult
	req := &store.ReserveRequest{Now: now, Items: []store.Item{{Dimension: "api#tps", Cost: 500}}, ID: store.NewLeaseID(), TTL: time.Minute, MaxWait: time.Second}
	if err := rec.Reserve(ctx, req, &res); err != nil || !res.Granted {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	valid := now.Add(500 * time.Millisecond)
	if !res.ValidAt.Equal(valid) {
		t.Fatalf("ValidAt = %v, want %v", res.ValidAt, valid)
	}
	cres, err := rec.Cancel(ctx, store.CancelRequest{Now: now.Add(100 * time.Millisecond), ID: req.ID,
		Items: []store.Item{{Dimension: "api#tps", Cost: 500}}, ValidAt: res.ValidAt})
	if err != nil || !cres.Cancelled {
		t.Fatalf("Cancel = %+v, %v", cres, err)
	}
	got := rec.Events()
	want := []verify.Event{
		{Time: now, Dimension: "api#tps", Kind: verify.Grant, Milli: 1000 * bucket.Milli},
		{Time: valid, Dimension: "api#tps", Kind: verify.Grant, Milli: 500 * bucket.Milli},
		{Time: valid, Dimension: "api#tps", Kind: verify.Settle, Milli: -500 * bucket.Milli},
	}
	if len(got) != len(want) {
		t.Fatalf("events = %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) || got[i].Dimension != want[i].Dimension || got[i].Kind != want[i].Kind || got[i].Milli != want[i].Milli {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if c := rec.Snapshot()["api#tps"]; c.Granted != 1 || c.Milli != 1000*bucket.Milli {
		t.Errorf("counts = %+v, want only the acquisition counted after the cancellation", c)
	}
}
