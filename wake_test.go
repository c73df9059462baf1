package sluice

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// hidden hides the store's notices (store.FreedWatcher) and
// store.InProcess, keeping the operations of the contract.
type hidden struct{ contract.Forward }

// A wake-up that came while a waiter asked survives the store's answer
// unless the client watches for the store's notices, which count it (see
// placed): without notices, a release in this process is the only thing
// that wakes a waiter before its next poll, and dropping it would leave
// a freed slot idle until then.
func TestWakeDuringAskSurvivesWithoutNotices(t *testing.T) {
	tests := []struct {
		name     string
		watching bool
		want     bool // the wake-up still pending after the answer
	}{
		{"no notices", false, true},
		{"notices", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memstore.New()
			defer mem.Close()
			var st store.Store = hidden{contract.Forward{Store: mem}}
			if tt.watching {
				st = mem
			}
			c, err := New(st)
			if err != nil {
				t.Fatal(err)
			}
			if tt.watching {
				_, c.watch.cancel = context.WithCancel(context.Background()) // as if the watch ran
			}
			items := []store.Item{{Dimension: "v#concurrent", Cost: 1}}
			lw := c.register(items, "", time.Minute)
			defer c.unregister(lw)
			c.asking(lw)
			c.freed(items) // a release in this process while lw asks
			c.placed(lw, Result{ahead: 1, Dimensions: []DimensionResult{{Dimension: "v#concurrent", Type: Concurrent, Cost: 1, Capacity: 1}}})
			got := len(lw.wake) == 1
			if got != tt.want {
				t.Errorf("wake-up pending after the answer = %v, want %v", got, tt.want)
			}
		})
	}
}
