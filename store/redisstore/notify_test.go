package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// A watch that heard nothing for several of its listening rounds still
// hears the next release, and ends with ErrClosed once the store is
// closed.
func TestWatchFreedAfterIdleAndClose(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	now := time.Now()
	b := store.Bucket{Name: "idle#concurrent", Config: bucket.Config{Type: bucket.Concurrent, Capacity: 1, CostPerCall: 1}}
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: now, Bucket: b}); err != nil {
		t.Fatal(err)
	}
	notices := make(chan string, 16)
	returned := make(chan error, 1)
	go func() {
		returned <- s.WatchFreed(ctx, func(d string) {
			select {
			case notices <- d:
			default:
			}
		})
	}()
	// Idle past several rounds of the check for Close, which must leave
	// the subscription listening.
	time.Sleep(4 * closedCheck)
	deadline := time.After(10 * time.Second)
	for heard := false; !heard; {
		req := &store.AcquireRequest{Now: time.Now(), Items: []store.Item{{Dimension: b.Name, Cost: 1}}, ID: store.NewLeaseID(), Caller: "t", TTL: time.Minute}
		var res store.AcquireResult
		if err := s.Acquire(ctx, req, &res); err != nil || !res.Granted {
			t.Fatalf("Acquire: %v, granted %v", err, res.Granted)
		}
		if _, err := s.Release(ctx, store.ReleaseRequest{Now: time.Now(), ID: req.ID}); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-notices:
			heard = d == b.Name
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no notice of a release within 10 s")
		}
	}
	s.Close()
	select {
	case err := <-returned:
		if !errors.Is(err, store.ErrClosed) {
			t.Fatalf("WatchFreed after Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchFreed still runs 10 s after Close")
	}
}
