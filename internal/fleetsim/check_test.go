package fleetsim

import (
	"context"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/fleetcheck"
)

// bucket creates dimension name with cfg and declares its limit.
func (f *fleet) bucket(name string, cfg bucket.Config) {
	f.t.Helper()
	if err := f.admin.PutBucket(context.Background(), sluice.Bucket{Name: name, Config: cfg}); err != nil {
		f.t.Fatal(err)
	}
	f.rec.Limit(name, fleetcheck.Limit{
		Capacity: cfg.Capacity, Amount: cfg.RefillAmount, PeriodMs: cfg.RefillPeriod.Milliseconds(),
		Concurrent: cfg.Type == sluice.Concurrent,
	})
}

// verify fails f's test when dim shows any excess, or when its use is below
// minUse (0 skips the use check). For a time-based dimension use is
// TimeUse over the run; for a concurrent one SlotUse while callers waited.
func (f *fleet) verify(dim string, minUse float64) {
	f.t.Helper()
	d := f.rec.Dimension(dim)
	r, err := fleetcheck.Check(d)
	if err != nil {
		f.t.Fatal(err)
	}
	var use float64
	if d.Limit.Concurrent {
		use = fleetcheck.SlotUse(d, f.rec.Waits(dim))
	} else {
		use = fleetcheck.TimeUse(d, 0, f.rec.Now())
	}
	if r.Excess <= 0 {
		f.t.Logf("%s on %s: %v; use %.1f %%", dim, f.kind, r, 100*use)
	} else {
		f.t.Errorf("%s on %s: over the limit: %v; use %.1f %%", dim, f.kind, r, 100*use)
	}
	if minUse > 0 && use < minUse {
		f.t.Errorf("%s on %s: use %.1f %%, want at least %.0f %% (%v)", dim, f.kind, 100*use, 100*minUse, r)
	}
}

// perPeriod is a tokens bucket of capacity refilled in full every period.
func perPeriod(capacity int64, period time.Duration) bucket.Config {
	return bucket.PerPeriod(sluice.Tokens, capacity, period)
}
