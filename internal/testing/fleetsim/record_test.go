package fleetsim

import (
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/testing/fleetcheck"
)

// The use of a concurrent dimension counts its holds and its callers'
// waits at their instants: a slot held back to back while a caller waits
// is used in full, however the holds fall across millisecond boundaries.
func TestSlotUseCountsHoldsExactly(t *testing.T) {
	tests := []struct {
		name  string
		holds [][2]int64 // µs since the start: from, to
		wait  [2]int64
		want  float64
	}{
		{"back to back across ms boundaries", [][2]int64{{300, 20_300}, {20_300, 40_300}}, [2]int64{300, 40_300}, 1},
		{"a 100 µs gap between holds", [][2]int64{{300, 20_300}, {20_400, 40_400}}, [2]int64{300, 40_400}, 40_000.0 / 40_100},
		{"idle half the wait", [][2]int64{{500, 10_500}}, [2]int64{500, 20_500}, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRecorder()
			r.Limit("v#concurrent", fleetcheck.Limit{Capacity: 1, Concurrent: true})
			at := func(us int64) time.Time { return r.start.Add(time.Duration(us) * time.Microsecond) }
			r.Waited("v#concurrent", at(tt.wait[0]), at(tt.wait[1]))
			for i, h := range tt.holds {
				lease := string(rune('a' + i))
				r.Held("v#concurrent", lease, 1, at(h[0]), false)
				r.Held("v#concurrent", lease, 0, at(h[1]), true)
			}
			if got := r.SlotUse("v#concurrent"); got < tt.want-1e-9 || got > tt.want+1e-9 {
				t.Errorf("SlotUse = %.4f, want %.4f", got, tt.want)
			}
		})
	}
}
