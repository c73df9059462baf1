package history

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// down is a store whose usage writes always fail, as in an outage.
type down struct{ store.Store }

func (down) PutUsage(context.Context, []store.UsageRow, store.UsageRetention) error {
	return errors.New("connection refused")
}

func (down) ListUsage(context.Context, store.UsageQuery) ([]store.UsageRow, error) {
	return nil, errors.New("connection refused")
}

// TestPendingBounded: while the store cannot be written, the rows waiting
// for it stay bounded: those past their retention are dropped, and past
// the cap ended minute rows are dropped (and reported), hour rows kept.
func TestPendingBounded(t *testing.T) {
	tests := []struct {
		name       string
		maxPending int
		want       func(minutes, hours int) bool
		dropped    bool
	}{
		// 3 hours of activity, minute rows kept 1 h: about 60 of the
		// 180 minute rows, and the 3 hours ended (kept 24 h).
		{"retention", maxPending, func(m, h int) bool { return m >= 59 && m <= 62 && h == 3 }, false},
		{"cap", 10, func(m, h int) bool { return m <= 10 && h == 3 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memstore.New()
			defer mem.Close()
			at := time.Now().UTC().Truncate(time.Hour).Add(-4 * time.Hour)
			r, err := New(down{mem}, WithClock(sluice.ClockFunc(func() time.Time { return at })),
				WithRetention(store.UsageRetention{Minute: time.Hour, Hour: 24 * time.Hour}))
			if err != nil {
				t.Fatal(err)
			}
			r.maxPending = tt.maxPending
			ctx := context.Background()
			for range 180 {
				r.Observer().Acquired(ctx, sluice.AcquireEvent{Dimensions: []sluice.Request{{Dimension: "d", Cost: 1}}, Outcome: sluice.Granted})
				at = at.Add(time.Minute)
				_ = r.Flush(ctx) // fails: the rows stay pending
			}
			var minutes, hours int
			r.mu.Lock()
			for k := range r.pending {
				if k.period == 60 {
					minutes++
				} else {
					hours++
				}
			}
			r.mu.Unlock()
			if !tt.want(minutes, hours) {
				t.Errorf("pending: %d minute rows and %d hour rows", minutes, hours)
			}
			reported := false
			for _, e := range r.Events(1000) {
				if e.Kind == EventStoreError && e.Dimension == "" {
					reported = true
				}
			}
			if reported != tt.dropped {
				t.Errorf("dropped rows reported: %v, want %v", reported, tt.dropped)
			}
		})
	}
}

// TestEventDetailBounded: an event keeps at most maxDetail bytes of its
// detail (and valid UTF-8), whatever the error said.
func TestEventDetailBounded(t *testing.T) {
	r, err := New(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	r.event(EventStoreError, "d", strings.Repeat("é", 5000))
	got := r.Events(1)[0].Detail
	if len(got) > maxDetail+len("…") || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("detail of %d bytes (valid UTF-8: %v), want at most %d and marked cut", len(got), utf8.ValidString(got), maxDetail)
	}
}
