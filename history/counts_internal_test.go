package history

import (
	"testing"
	"time"
)

// TestCounterNames: every counter has its own name, fewer than a row may
// carry, and a tally survives its trip through a row's counters.
func TestCounterNames(t *testing.T) {
	seen := map[string]bool{minRemainingName: true}
	for i, n := range counterNames {
		if n == "" || seen[n] {
			t.Errorf("counter %d has the name %q, empty or taken", i, n)
		}
		seen[n] = true
	}
	if len(seen) > 64 {
		t.Errorf("%d counters; a row carries at most 64", len(seen))
	}
	in := newTally()
	for i := range in.n {
		in.n[i] = int64(i*7 + 1)
	}
	in.remaining(42)
	if out := tallyOf(in.counters()); out != in {
		t.Errorf("round trip: %+v, want %+v", out, in)
	}
	if out := tallyOf(map[string]int64{"grants": 3, "from_a_newer_writer": 9}); out.n[cGrants] != 3 || out.minRem != -1 {
		t.Errorf("tallyOf with an unknown name = %+v", out)
	}
	if len(WaitBounds) != nBounds {
		t.Fatalf("WaitBounds has %d bounds, the histogram %d", len(WaitBounds), nBounds)
	}
	for i, b := range WaitBounds {
		if b != bounds[i] {
			t.Errorf("WaitBounds[%d] = %s, the histogram's %s", i, b, bounds[i])
		}
	}
}

// TestWaitHistogram: a wait counts in the first bucket whose bound it does
// not exceed.
func TestWaitHistogram(t *testing.T) {
	for _, tt := range []struct {
		d      time.Duration
		bucket int
	}{
		{0, 0}, {10 * time.Millisecond, 0}, {11 * time.Millisecond, 1}, {time.Second, 5},
		{time.Minute, nBounds - 1}, {time.Minute + 1, nBounds},
	} {
		tl := newTally()
		tl.wait(tt.d)
		c := tl.counts()
		if c.WaitHist[tt.bucket] != 1 || c.Waits != 1 || c.WaitSum != tt.d {
			t.Errorf("wait %s: %+v, want bucket %d", tt.d, c, tt.bucket)
		}
	}
}
