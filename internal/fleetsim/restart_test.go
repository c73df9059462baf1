package fleetsim

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/fleetcheck"
	"github.com/ontopix/sluice/internal/redistest"
)

// TestRestartEmpty restarts a redis-server without persistence in the
// middle of a saturated run; the bucket is put again at once, as a
// replica applying its limits file at start-up would.
func TestRestartEmpty(t *testing.T) {
	srv := redistest.New(t)
	f := newFleetOn(t, "redis", srv.Addr)
	f.bucket("v#tpm", perPeriod(100, time.Second))
	saturate(t, f, 3, 3*time.Second, nil, func([]*Member) {
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
		f.rec.Add("v#tpm", fleetcheck.Event{Kind: fleetcheck.Restart, Lo: at, Hi: f.rec.Now()})
		for {
			err := f.admin.PutBucket(context.Background(), sluice.Bucket{Name: "v#tpm", Config: perPeriod(100, time.Second)})
			if err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	f.verify("v#tpm", 0.95)
}
