package label

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
)

func TestReconcile(t *testing.T) {
	tests := []struct {
		e    sluice.ReconcileEvent
		want [4]int
	}{
		{sluice.ReconcileEvent{}, [4]int{}},
		{sluice.ReconcileEvent{Restored: 6, Reclaimed: 3, AlreadyCapped: 1, Orphans: 1}, [4]int{2, 1, 2, 1}},
		{sluice.ReconcileEvent{Restored: 2, Reclaimed: 2}, [4]int{2, 0, 0, 0}},
		{sluice.ReconcileEvent{Restored: 1, Orphans: 1}, [4]int{0, 0, 0, 1}},
		// Inconsistent counts never yield a negative result.
		{sluice.ReconcileEvent{Restored: 1, Reclaimed: 2, AlreadyCapped: 3}, [4]int{0, 3, 0, 0}},
	}
	for _, tt := range tests {
		if got := Reconcile(&tt.e); got != tt.want {
			t.Errorf("Reconcile(%+v) = %v, want %v", tt.e, got, tt.want)
		}
	}
}

func TestAcquire(t *testing.T) {
	tests := []struct {
		e    sluice.AcquireEvent
		want string
	}{
		{sluice.AcquireEvent{Outcome: sluice.Granted}, Granted},
		{sluice.AcquireEvent{Outcome: sluice.RetryIn}, RetryIn},
		{sluice.AcquireEvent{Outcome: sluice.Granted, Degraded: true}, Degraded},
		{sluice.AcquireEvent{Err: sluice.ErrUnavailable}, Error},
		{sluice.AcquireEvent{Outcome: sluice.Granted, Err: sluice.ErrClosed}, Error},
		{sluice.AcquireEvent{}, Error},
	}
	for _, tt := range tests {
		if got := Outcomes[Acquire(&tt.e)]; got != tt.want {
			t.Errorf("Acquire(%+v) = %s, want %s", tt.e, got, tt.want)
		}
	}
}

func TestOp(t *testing.T) {
	tests := []struct{ op, want string }{
		{"acquire", "acquire"}, {"list_buckets", "list_buckets"}, {"", OtherOp}, {"Acquire", OtherOp},
	}
	for _, tt := range tests {
		if got := Op(tt.op); got != tt.want {
			t.Errorf("Op(%q) = %q, want %q", tt.op, got, tt.want)
		}
	}
}

// TestDimensionsCap builds from many goroutines at once and checks that
// exactly max names get their own entry, each built once.
func TestDimensionsCap(t *testing.T) {
	var mu sync.Mutex
	builds := map[string]int{}
	d := NewDimensions(3, func(dim string) string {
		mu.Lock()
		builds[dim]++
		mu.Unlock()
		return dim
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				d.Get(fmt.Sprint((g + i) % 10))
			}
		})
	}
	wg.Wait()
	named := 0
	for dim, n := range builds {
		if n != 1 {
			t.Errorf("%q built %d times, want 1", dim, n)
		}
		if dim != OtherDimension {
			named++
		}
	}
	if named != 3 || builds[OtherDimension] != 1 {
		t.Errorf("builds = %v, want 3 named and %q once", builds, OtherDimension)
	}
	for dim := range builds {
		if got := d.Get(dim); got != dim {
			t.Errorf("Get(%q) = %q after the cap, want its own entry", dim, got)
		}
	}
}

func TestDimensionWait(t *testing.T) {
	two := []sluice.Request{{Dimension: "a#x", Cost: 1}, {Dimension: "a#y", Cost: 1}}
	withResults := &sluice.AcquireEvent{Dimensions: two, RetryIn: 3 * time.Second,
		Results: []sluice.DimensionResult{{RetryIn: 0}, {RetryIn: 3 * time.Second}}}
	without := &sluice.AcquireEvent{Dimensions: two, RetryIn: 3 * time.Second}
	tests := []struct {
		e         *sluice.AcquireEvent
		i         int
		want      time.Duration
		wantShort bool
	}{
		{withResults, 0, 0, false},
		{withResults, 1, 3 * time.Second, true},
		{without, 0, 3 * time.Second, true},
		{without, 1, 3 * time.Second, true},
	}
	for _, tt := range tests {
		if got, short := DimensionWait(tt.e, tt.i); got != tt.want || short != tt.wantShort {
			t.Errorf("DimensionWait(%d) = %s, %t; want %s, %t", tt.i, got, short, tt.want, tt.wantShort)
		}
	}
}
