package transport_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice/vendors/vendorsim"
)

// windowLoad runs tpmLoad's workers against a simulator whose limits
// follow window, from offset into a calendar minute for run, each call a
// 500-token prompt with max_tokens 100.
func windowLoad(t *testing.T, window vendorsim.Window, offset, run time.Duration) readingRun {
	t.Helper()
	time.Sleep(offset) // synctest's clock starts on a minute
	return tpmLoad(t, vendorsim.Rules{Window: window}, 5, 500, 100, run)
}

// TestCalendarWindowVendor runs the fleet against a vendor that counts
// its TPM per calendar minute, from 5, 23 or 47 s into a minute to the end of the
// third, less 2 s for the last calls to finish (so that the allowance is
// three minutes' limits), with a full
// bucket. The bucket's burst and its refill both land in the first
// minute, which holds one limit: without reading the vendor's reset
// as the minute's end, the calls refilled after the burst drew 429s until
// one's retry-after cooled the dimension down. The same load against a
// vendor that refills continuously is the control: it must not be held
// back.
func TestCalendarWindowVendor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window vendorsim.Window
	}{
		{"calendar minute", vendorsim.WindowFixed},
		{"continuous bucket", vendorsim.WindowTokenBucket},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, offset := range []time.Duration{5 * time.Second, 23 * time.Second, 47 * time.Second} {
				t.Run(offset.String(), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						r := windowLoad(t, tc.window, offset, 3*time.Minute-offset-2*time.Second)
						t.Logf("%s from %v into a minute: %d admitted, %d rate-limited, %.1f %% of the vendor's TPM allowance", tc.name, offset, r.admitted, r.limited, 100*r.use)
						if r.limited != 0 {
							t.Errorf("from %v into a minute: 429s: %d, want 0", offset, r.limited)
						}
						if r.use < 0.95 {
							t.Errorf("from %v into a minute: use %.1f %%, want at least 95 %%", offset, 100*r.use)
						}
					})
				})
			}
		})
	}
}
