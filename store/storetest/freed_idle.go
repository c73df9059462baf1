package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// FreedAfterIdleAndClose checks a store.FreedWatcher whose watch runs in
// rounds (a read deadline, a check for Close): a watch that heard nothing
// for several rounds of length round still hears the next release, and it
// ends with store.ErrClosed once the store is closed (by closeStore).
func FreedAfterIdleAndClose(t *testing.T, s store.FreedWatcher, round time.Duration, closeStore func() error) {
	t.Helper()
	ctx := context.Background()
	b := store.Bucket{Name: "idle#concurrent", Config: bucket.Config{Type: bucket.Concurrent, Capacity: 1, CostPerCall: 1}}
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: b}); err != nil {
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
	time.Sleep(4 * round) // idle past several rounds: the watch must still listen
	deadline := time.After(freedWait)
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
			t.Fatalf("no notice of a release within %s", freedWait)
		}
	}
	_ = closeStore()
	select {
	case err := <-returned:
		if !errors.Is(err, store.ErrClosed) {
			t.Fatalf("WatchFreed after Close: %v, want ErrClosed", err)
		}
	case <-time.After(freedWait):
		t.Fatalf("WatchFreed still runs %s after Close", freedWait)
	}
}
