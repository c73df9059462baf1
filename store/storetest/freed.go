package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice/store"
)

// freedWait bounds how long the suite waits for a notice of freed units:
// delivery is best-effort, so the suite frees units again and again until
// one arrives (a subscription may still be starting when the first is
// sent), and fails only when none arrives in this long.
const freedWait = 10 * time.Second

// testFreed checks the optional store.FreedWatcher capability: a watch on
// one handle hears a Release and a Dequeue made through another (Harness.
// OpenHandle, or the same handle), and returns when its context ends.
// Stores without the capability skip it.
func testFreed(t *testing.T, h Harness) {
	raw := h.NewStore(t)
	fw, ok := raw.(store.FreedWatcher)
	if !ok {
		t.Skip("the store does not implement store.FreedWatcher: its waiters poll")
	}
	other := raw
	if h.OpenHandle != nil {
		other = h.OpenHandle(t, raw)
	}
	e := &env{t: t, h: h, s: checked(other), ctx: context.Background(), caps: capabilitiesOf(other)}
	e.put(0, slots("freed#concurrent", 1))
	e.put(0, slots("quiet#concurrent", 1))

	notices := make(chan string, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() {
		returned <- fw.WatchFreed(ctx, func(dim string) {
			select {
			case notices <- dim:
			default:
			}
		})
	}()
	defer func() {
		cancel()
		select {
		case err := <-returned:
			if err != nil {
				t.Errorf("WatchFreed after its context ended: %v, want nil", err)
			}
		case <-time.After(freedWait):
			t.Errorf("WatchFreed did not return within %s of its context's end", freedWait)
		}
	}()

	t.Run("Release", func(t *testing.T) {
		awaitFreed(t, notices, "freed#concurrent", func(ms int64) {
			req := e.req(ms, item("freed#concurrent", 1))
			e.grant(req)
			if _, err := e.s.Release(e.ctx, store.ReleaseRequest{Now: At(ms), ID: req.ID, Hint: "freed#concurrent"}); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	})
	t.Run("Dequeue", func(t *testing.T) {
		holder := e.req(0, item("quiet#concurrent", 1))
		e.grant(holder)
		awaitFreed(t, notices, "quiet#concurrent", func(ms int64) {
			req := e.req(ms, item("quiet#concurrent", 1))
			req.Queue = time.Minute
			if res := e.acquire(req); res.Granted {
				t.Fatal("Acquire on a full bucket: granted, want a ticket")
			}
			if err := e.s.Dequeue(e.ctx, store.DequeueRequest{Now: At(ms), ID: req.ID, Dimensions: []string{"quiet#concurrent"}}); err != nil {
				t.Fatalf("Dequeue: %v", err)
			}
		})
	})
}

// awaitFreed calls free every 50 ms (at 10 ms steps of the store's clock)
// until a notice for dim arrives, and fails after freedWait.
func awaitFreed(t *testing.T, notices <-chan string, dim string, free func(ms int64)) {
	t.Helper()
	deadline := time.Now().Add(freedWait)
	for ms := int64(10); time.Now().Before(deadline); ms += 10 {
		free(ms)
		tick := time.After(50 * time.Millisecond)
		for {
			select {
			case got := <-notices:
				if got == dim {
					return
				}
				continue
			case <-tick:
			}
			break
		}
	}
	t.Fatalf("no notice for %s within %s of freeing its units again and again", dim, freedWait)
}
