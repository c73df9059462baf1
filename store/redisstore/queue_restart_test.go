package redisstore

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/internal/testing/slotload"
	"github.com/ontopix/sluice/store"
)

// TestWaitersRecoverAfterRestart runs 16 workers waiting in line for 8
// slots (100 ms holds) in two processes, restarts a persistent server
// (SIGKILL, then start on the same data), and checks that every slot is
// in use again: the tickets of the waiters the restart made give up hold
// back only their own costs and are removed once the server answers. How
// soon, and how many slots were granted in the 2.5 s after the restart,
// is logged for docs/reliability.md.
func TestWaitersRecoverAfterRestart(t *testing.T) {
	srv, err := redistest.Start(redistest.Persistent...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	prefix := uniquePrefix()
	var clients []*sluice.Client
	var stores []*Store
	for range 2 {
		rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { rc.Close() })
		s, err := New(rc, WithPrefix(prefix), WithTimeout(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		cfg := sluice.DefaultConfig()
		cfg.LeaseTTL = 2 * time.Second
		cfg.OpTimeout = 300 * time.Millisecond
		c, err := sluice.New(s, sluice.WithConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		stores, clients = append(stores, s), append(clients, c)
	}
	const dim = "restart#concurrent"
	put(t, stores[0], time.Now(), store.Bucket{Name: dim, Config: bucket.ConcurrentSlots(8)})
	r, err := slotload.RunFault(context.Background(), slotload.Config{
		Clients: clients, Dimension: dim, Slots: 8, Workers: 16, Hold: 100 * time.Millisecond, Window: 10 * time.Second,
	}, func() error {
		if err := srv.Kill(); err != nil {
			return err
		}
		return srv.Restart()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the restart: every slot held again after %v (0: not within 10 s); %d slots granted in 2.5 s (at most %d)", r.Full.Round(time.Millisecond), r.After, 8*25)
	// How soon every slot is held again is a wall-clock figure: a loaded
	// machine (CI runs every package at once) can keep the eight holds
	// from lining up although grants resumed. The deterministic check is
	// the root package's TestQueueRecoversAfterAnOutage; this one asserts
	// only with SLUICE_LONG=1, on a quiet machine.
	if r.Full == 0 {
		if os.Getenv("SLUICE_LONG") != "" {
			t.Errorf("the 8 slots were never all held again within 10 s of the restart")
		} else {
			t.Logf("the 8 slots were never all held at once within 10 s of the restart (asserted with SLUICE_LONG=1)")
		}
	}
}
