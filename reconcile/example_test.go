package reconcile_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/reconcile"
	"github.com/ontopix/sluice/store/memstore"
)

// Example shows a slot whose holder crashed (it never released its lease)
// coming back: once the lease's TTL has passed, one reconcile pass returns
// it to its bucket, exactly once.
func Example() {
	ctx := context.Background()
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	clock := sluice.ClockFunc(func() time.Time { return now })
	cfg := sluice.DefaultConfig()
	cfg.LeaseTTL = time.Minute
	client, _ := sluice.New(memstore.New(), sluice.WithConfig(cfg), sluice.WithClock(clock))
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "elevenlabs#concurrent", Config: sluice.ConcurrentLimit(2)})

	// A holder takes a slot and dies without releasing it.
	if res, _ := client.Acquire(ctx, "elevenlabs#concurrent"); res.Granted() {
		fmt.Println("slot taken until", res.Lease.ExpiresAt().Format("15:04"))
	}

	r, _ := reconcile.NewForClient(client)
	now = now.Add(2 * time.Minute) // past the lease's TTL
	rep, _ := r.RunOnce(ctx)
	fmt.Println("restored", rep.Restored, "reclaimed", rep.Reclaimed)

	rep, _ = r.RunOnce(ctx) // idempotent: nothing left to do
	fmt.Println("restored", rep.Restored)
	// Output:
	// slot taken until 10:01
	// restored 1 reclaimed 1
	// restored 0
}
