package history_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// TestEvents: cooldowns, syncs that lowered a balance, penalties and store
// errors are kept newest first; a routine sync is not; identical events in
// a row are counted in one; the ring keeps the newest.
func TestEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		rec, _ := history.New(mem, history.WithMaxEvents(4))
		c := newClient(t, mem, rec.Observer())
		until := time.Now().Add(30 * time.Second)
		if _, err := c.Cooldown(ctx, "openai#tpm", until); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Sync(ctx, "anthropic#tpm", 5_000); err != nil { // no lower: routine
			t.Fatal(err)
		}
		if _, err := c.Sync(ctx, "anthropic#tpm", 500); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Penalize(ctx, "idle#tpm", 0.5); err != nil {
			t.Fatal(err)
		}
		obs := rec.Observer()
		for range 3 {
			obs.StoreError(ctx, sluice.StoreErrorEvent{Op: "acquire", Kind: sluice.KindUnavailable, Err: errors.New("dial tcp: refused")})
		}
		got := rec.Events(10)
		want := []struct {
			kind, dim, detail string
			count             int
		}{
			{history.EventStoreError, "", "acquire: unavailable: dial tcp: refused", 3},
			{history.EventPenalty, "idle#tpm", "factor 0.5", 1},
			{history.EventSync, "anthropic#tpm", "vendor reported 500 remaining", 1},
			{history.EventCooldown, "openai#tpm", "until " + until.UTC().Format(time.RFC3339Nano), 1},
		}
		if len(got) != len(want) {
			t.Fatalf("events = %+v, want %d", got, len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.Kind != w.kind || g.Dimension != w.dim || !strings.Contains(g.Detail, w.detail) || g.Count != w.count {
				t.Errorf("event %d = %+v, want kind %s, dimension %q, detail with %q, count %d", i, g, w.kind, w.dim, w.detail, w.count)
			}
		}
		if got := rec.Events(2); len(got) != 2 || got[0].Kind != history.EventStoreError {
			t.Errorf("Events(2) = %+v, want the two newest", got)
		}
		// A fifth distinct event drops the oldest, the cooldown.
		obs.Recreated(ctx, sluice.RecreateEvent{Dimension: "openai#tpm", Op: "acquire"})
		got = rec.Events(10)
		if len(got) != 4 || got[0].Kind != history.EventRecreated || got[3].Kind != history.EventSync {
			t.Errorf("after a fifth event: %+v, want recreated first and the sync last", got)
		}
		if got := rec.Events(0); len(got) != 0 {
			t.Errorf("Events(0) = %v", got)
		}
	})
}

// TestOptionsAndQueries: bad options and queries are errors naming the
// field, matching store.ErrInvalid.
func TestOptionsAndQueries(t *testing.T) {
	mem := memstore.New()
	defer mem.Close()
	for _, tt := range []struct {
		name  string
		opt   history.Option
		field string
	}{
		{"flush", history.WithFlushEvery(0), "flush interval"},
		{"retention", history.WithRetention(store.UsageRetention{Minute: -time.Hour}), "retention"},
		{"clock", history.WithClock(nil), "clock"},
		{"writer", history.WithWriter(""), "writer"},
		{"window", history.WithLiveWindow(time.Second), "live window"},
		{"series", history.WithMaxSeries(0), "max series"},
		{"events", history.WithMaxEvents(0), "max events"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := history.New(mem, tt.opt)
			if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("New = %v, want an invalid %s", err, tt.field)
			}
		})
	}
	rec, err := history.New(mem, history.WithWriter("w-1"))
	if err != nil || rec.Writer() != "w-1" {
		t.Fatalf("New(WithWriter) = %v, %v", rec, err)
	}
	now := time.Now()
	for _, tt := range []struct {
		name  string
		q     history.Query
		field string
	}{
		{"no dimension", history.Query{From: now, To: now.Add(time.Minute), Step: time.Minute}, "dimension"},
		{"bad step", history.Query{Dimension: "d", From: now, To: now.Add(time.Minute), Step: 5 * time.Second}, "step"},
		{"no from", history.Query{Dimension: "d", To: now, Step: time.Minute}, "from"},
		{"to before from", history.Query{Dimension: "d", From: now, To: now.Add(-time.Minute), Step: time.Minute}, "to"},
		{"too many points", history.Query{Dimension: "d", From: now.Add(-200 * 24 * time.Hour), To: now, Step: time.Minute}, "to"},
		{"a range beyond int64 seconds", history.Query{Dimension: "d", From: time.Unix(1, 0), To: time.Unix(6e18, 0), Step: time.Second}, "to"},
		{"before 1970", history.Query{Dimension: "d", From: time.Unix(-6e18, 0), To: now, Step: time.Second}, "from"},
		{"a range whose seconds overflow", history.Query{Dimension: "d", From: time.Unix(-6e18, 0), To: time.Unix(6e18, 0), Step: time.Second}, "from"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rec.Query(context.Background(), tt.q)
			if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "invalid "+tt.field) {
				t.Errorf("Query = %v, want an invalid %s", err, tt.field)
			}
		})
	}
}

// TestRunFlushesAtTheEnd: Run's last flush, after its context ended,
// writes what the interval had not.
func TestRunFlushesAtTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		us := newUsageStore(t, mem)
		rec, _ := history.New(us, history.WithFlushEvery(time.Hour))
		w := newWant()
		c := newClient(t, mem, rec.Observer(), w.observer())
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()
		load(t, c, dims, callers, 2, 3, time.Second)
		if n := us.calls()[dims[0]]; n != 0 {
			t.Fatalf("%d writes before the first interval", n)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		reader, _ := history.New(mem)
		checkTotals(t, reader, w, dims[0], callers)
	})
}
