package fleetsim

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/testing/fleetcheck"
	"github.com/ontopix/sluice/internal/testing/redistest"
)

// TestRestartEmpty restarts a redis-server without persistence in the
// middle of a saturated run.
//
// In "recreated by the clients" the members declare their buckets
// (WithBuckets, as limits.NewClient does) and nothing else puts the bucket
// back: the first member that finds it missing re-creates it, empty, and
// the fleet admits only what the bucket earns from then on. What remains
// is the reservations (Wait) granted before the loss and valid after it:
// they were debited from the lost balance, which went into debt for them,
// and the re-created bucket does not know that debt. Each member holds at
// most one, of cost, so the excess is at most members × cost.
//
// In "put again by an operator" the bucket is put again at once with a
// plain PutBucket, as an operator running limits apply, or a replica
// applying its limits file at start-up, does. That is a fresh start: the
// bucket comes back full, and the fleet, which spent its tokens before the
// loss, may spend up to one capacity more around the restart, besides the
// reservations' debt. The test allows exactly that and no more.
func TestRestartEmpty(t *testing.T) {
	const dim, capacity = "v#tpm", 100
	const members, cost = 3, 5 // saturate's
	const debt = members * cost
	cfg := perPeriod(capacity, time.Second)
	for _, tt := range []struct {
		name  string
		admin bool    // an operator puts the bucket again after the restart
		slack float64 // the excess the case allows, in tokens
	}{
		{"recreated by the clients", false, debt},
		{"put again by an operator", true, capacity + debt},
	} {
		t.Run(tt.name, func(t *testing.T) {
			withUse(t, func(lenient bool) *fleet {
				srv := redistest.New(t)
				f := newFleetOn(t, "redis", srv.Addr)
				f.lenient = lenient
				f.opts = []sluice.Option{sluice.WithBuckets([]sluice.Bucket{{Name: dim, Config: cfg}})}
				f.bucket(dim, cfg)
				saturate(t, f, members, 3*time.Second, nil, func([]*Member) {
					time.Sleep(time.Second)
					at := f.rec.Now()
					if err := srv.Kill(); err != nil {
						t.Error(err)
						return
					}
					if err := srv.Restart(); err != nil {
						t.Error(err)
						return
					}
					f.rec.Add(dim, fleetcheck.Event{Kind: fleetcheck.Restart, Lo: at, Hi: f.rec.Latest()})
					for tt.admin {
						err := f.admin.PutBucket(context.Background(), sluice.Bucket{Name: dim, Config: cfg})
						if err == nil {
							break
						}
						time.Sleep(10 * time.Millisecond)
					}
				})
				f.verifyWithin(dim, 0.95, tt.slack)
				return f
			})
		})
	}
}
