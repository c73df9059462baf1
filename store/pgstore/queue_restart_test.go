package pgstore

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/internal/testing/slotload"
	"github.com/ontopix/sluice/store"
)

// TestWaitersRecoverAfterRestart runs 16 workers waiting in line for 8
// slots (100 ms holds) in two processes, restarts the server in immediate
// mode, and checks that every slot is in use again: the tickets of the
// waiters the restart made give up hold back only their own costs and
// are removed once the server answers. How soon, and how many slots were
// granted in the 2.5 s after the restart, is logged for
// docs/reliability.md.
func TestWaitersRecoverAfterRestart(t *testing.T) {
	srv := ownServer(t)
	admin := newStoreOn(t, pgtest.PoolAt(t, srv.URL, nil))
	var clients []*sluice.Client
	for range 2 {
		s, err := New(pgtest.PoolAt(t, srv.URL, nil), WithSchema(admin.Schema()), WithTimeout(faultOpTO))
		if err != nil {
			t.Fatal(err)
		}
		cfg := sluice.DefaultConfig()
		cfg.LeaseTTL = faultTTL
		cfg.OpTimeout = faultOpTO
		c, err := sluice.New(s, sluice.WithConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	const dim = "restart#concurrent"
	if err := admin.PutBucket(context.Background(), store.PutBucketRequest{Now: time.Now(), Bucket: store.Bucket{Name: dim, Config: bucket.ConcurrentSlots(8)}}); err != nil {
		t.Fatal(err)
	}
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
