package remotestore_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/remotestore"
)

// TestConnectionsReused makes 16 callers of one process call the door at
// once, as a fleet member's workers do: the store keeps a connection per
// concurrent caller and reuses it, instead of opening (and closing) one
// for most calls, each costing a TCP handshake on the call's path.
func TestConnectionsReused(t *testing.T) {
	const callers, calls = 16, 300
	var opened atomic.Int64
	door := remotestore.Handler(memstore.New())
	// Each call takes a millisecond in the server, as a store's round trip
	// does, so that the callers' calls overlap.
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond)
		door.ServeHTTP(w, r)
	}))
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	s := open(t, hs.URL)
	ctx := context.Background()
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: store.Bucket{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 1_000_000, time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				if _, err := s.Peek(ctx, store.PeekRequest{Now: time.Now(), Dimensions: []string{"v#rpm"}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// One per caller, the first call's, and as many again for the dials
	// the transport starts while another call's connection comes free.
	if got, most := opened.Load(), int64(2*callers+1); got > most {
		t.Errorf("%d calls opened %d connections, want at most %d", callers*calls, got, most)
	} else {
		t.Logf("%d calls opened %d connections", callers*calls, got)
	}
}

// TestDoorSeesThroughTheChecks serves the door on a store behind the
// portable layer's checks, as sluice serve does with every store it
// opens: the capabilities of the store behind are still offered (the
// freed-slot notices, whose clock decides).
func TestDoorSeesThroughTheChecks(t *testing.T) {
	hs := httptest.NewServer(remotestore.Handler(contract.Checked(memstore.New())))
	t.Cleanup(hs.Close)
	s := open(t, hs.URL)
	if _, ok := s.(store.FreedWatcher); !ok {
		t.Errorf("the remote store of a memory store behind the checks has no freed-slot notices (%T)", s)
	}
}
