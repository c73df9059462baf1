package fleetsim

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/fleetcheck"
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
// TimeUse from its first grant to its last event; for a concurrent one
// SlotUse while callers waited, from the holds and waits to the
// microsecond (Recorder.SlotUse).
func (f *fleet) verify(dim string, minUse float64) {
	f.t.Helper()
	f.verifyWithin(dim, minUse, 0)
}

// verifyWithin is verify with an excess of up to slack tokens allowed: the
// documented bound of a condition that the guarantee itself prices, such
// as a caller clock running ahead of the true time (see skewSlack).
func (f *fleet) verifyWithin(dim string, minUse, slack float64) {
	f.t.Helper()
	d := f.rec.Dimension(dim)
	r, err := fleetcheck.Check(d)
	if err != nil {
		f.t.Fatal(err)
	}
	var use float64
	if d.Limit.Concurrent {
		use = f.rec.SlotUse(dim)
	} else {
		// From the first grant, when callers began to ask (the harness's own
		// set-up before it is no time the limit could have been used), to
		// the last event.
		from, to := int64(-1), int64(0)
		for _, e := range d.Events {
			if e.Kind == fleetcheck.Grant && (from < 0 || e.Lo < from) {
				from = e.Lo
			}
			to = max(to, e.Hi)
		}
		use = fleetcheck.TimeUse(d, max(from, 0), to)
	}
	if r.Excess <= slack {
		f.t.Logf("%s on %s: %v (allowed excess %.2f); use %.1f %%", dim, f.kind, r, slack, 100*use)
	} else {
		f.t.Errorf("%s on %s: over the limit: %v (allowed excess %.2f); use %.1f %%", dim, f.kind, r, slack, 100*use)
		if path := f.keepHistory(dim, r); path != "" {
			f.t.Logf("history kept in %s", path)
		}
	}
	if minUse > 0 && use < minUse {
		if f.lenient {
			f.missedUse = true
			f.t.Logf("%s on %s: use %.1f %%, under the %.0f %% target in this attempt (%v)", dim, f.kind, 100*use, 100*minUse, r)
			return
		}
		f.t.Errorf("%s on %s: use %.1f %%, want at least %.0f %% (%v)", dim, f.kind, 100*use, 100*minUse, r)
	}
}

// useAttempts is how many times withUse runs a scenario with a use target.
const useAttempts = 2

// withUse runs scenario, which builds a fleet with newFleet, runs it and
// verifies it, and returns the fleet. Use is measured in real time, with
// the rest of the suite running beside it on a small machine, so a run
// whose only miss is its use target is run again, on a new fleet; the
// last attempt's miss fails the test. An excess fails the test in any
// attempt. lenient tells scenario to set the fleet's lenient field.
func withUse(t *testing.T, scenario func(lenient bool) *fleet) {
	t.Helper()
	for attempt := 1; attempt <= useAttempts; attempt++ {
		f := scenario(attempt < useAttempts)
		if f == nil || !f.missedUse || t.Failed() {
			return
		}
		t.Logf("attempt %d of %d missed its use target only: running it again", attempt, useAttempts)
	}
}

// perPeriod is a tokens bucket of capacity refilled in full every period.
func perPeriod(capacity int64, period time.Duration) bucket.Config {
	return bucket.PerPeriod(sluice.Tokens, capacity, period)
}

// skewSlack is the excess the guarantee allows a bucket of cfg when
// callers' clocks run ahead of the true time (caller-clock stores): a
// clock ahead by D can advance a bucket's refill by rate × D at most,
// never more than its capacity, and only as far as the latest time any
// clock reported, since a refill timestamp never moves backwards. ahead
// is the most any clock of the run is ever ahead of the true time.
func skewSlack(cfg bucket.Config, ahead time.Duration) float64 {
	if ahead <= 0 {
		return 0
	}
	earned := float64(cfg.RefillAmount) * float64(ahead) / float64(cfg.RefillPeriod)
	return min(earned, float64(cfg.Capacity))
}

// ahead returns the most c runs ahead of the true time over a run of d.
func (c Clock) ahead(d time.Duration) time.Duration {
	a := c.Offset + time.Duration(max(c.Drift, 0)*float64(d))
	if c.Jump > 0 {
		a += c.Jump
	}
	return max(a, 0)
}
