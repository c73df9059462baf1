package history_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// TestOneWritePerActiveDimension: each flush writes each dimension with
// activity since the previous one once, and the others not at all.
func TestOneWritePerActiveDimension(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		us := newUsageStore(t, mem)
		rec, _ := history.New(us)
		c := newClient(t, mem, rec.Observer())
		all := []string{"openai#tpm", "anthropic#tpm", "idle#tpm"}
		// Round k acquires on the dimensions whose bit is set in
		// active[k], as several callers, over 10 s.
		active := []int{0b011, 0b001, 0b000, 0b110, 0b100, 0b111}
		for k, bits := range active {
			before := us.calls()
			for i, d := range all {
				if bits&(1<<i) == 0 {
					continue
				}
				for j := range 5 {
					if _, err := c.Acquire(ctx, d, sluice.WithCaller(callers[j%len(callers)])); err != nil {
						t.Fatal(err)
					}
				}
			}
			time.Sleep(10 * time.Second)
			if err := rec.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			after := us.calls()
			for i, d := range all {
				want := 0
				if bits&(1<<i) != 0 {
					want = 1
				}
				if got := after[d] - before[d]; got != want {
					t.Errorf("round %d: %d writes of %s, want %d", k, got, d, want)
				}
			}
		}
	})
}

// TestWritesPerTenSeconds measures the store writes Run makes under steady
// load on three dimensions for two minutes: at most one per dimension per
// flush interval, and one more for the last flush.
func TestWritesPerTenSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		us := newUsageStore(t, mem)
		rec, _ := history.New(us)
		c := newClient(t, mem, rec.Observer())
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()
		all := []string{"openai#tpm", "anthropic#tpm", "idle#tpm"}
		const span = 2 * time.Minute
		for end := time.Now().Add(span); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			for i, d := range all {
				_, _ = c.Acquire(ctx, d, sluice.WithCaller(callers[i]))
			}
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		flushes := int(span/history.DefaultFlushEvery) + 1
		for _, d := range all {
			n := us.calls()[d]
			t.Logf("%s: %d writes in %s (%.2f per 10 s) for %d acquisitions per 10 s", d, n, span, float64(n)/float64(span/(10*time.Second)), 100)
			if n > flushes {
				t.Errorf("%s: %d writes in %s, more than one per flush (%d)", d, n, span, flushes)
			}
			if n < flushes-1 {
				t.Errorf("%s: %d writes in %s, want about one per flush (%d): activity was not written", d, n, span, flushes)
			}
		}
	})
}

// TestInvalidRowsDropped: rows the store refuses as invalid are dropped
// after one try, with an event; the other dimensions' are written.
func TestInvalidRowsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		us := newUsageStore(t, mem)
		rec, _ := history.New(us)
		obs := rec.Observer()
		for _, d := range []string{"bad{dimension}", "openai#tpm"} {
			obs.Acquired(ctx, sluice.AcquireEvent{Dimensions: []sluice.Request{{Dimension: d, Cost: 1}}, Outcome: sluice.Granted})
		}
		if err := rec.Flush(ctx); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Flush = %v, want an invalid row", err)
		}
		if err := rec.Flush(ctx); err != nil {
			t.Fatalf("second Flush = %v, want the invalid rows dropped", err)
		}
		if got := us.calls(); got["bad{dimension}"] != 0 || got["openai#tpm"] != 1 {
			t.Errorf("writes = %v, want none of the invalid dimension (refused before the store) and one of the other", got)
		}
		if ev := rec.Events(1); len(ev) != 1 || ev[0].Kind != history.EventStoreError || ev[0].Dimension != "bad{dimension}" {
			t.Errorf("events = %+v, want the refused write", ev)
		}
		reader, _ := history.New(mem)
		if got := query(t, reader, "openai#tpm", "", time.Minute).Grants; got != 1 {
			t.Errorf("openai#tpm grants = %d, want 1", got)
		}
	})
}

// noHistory is a store whose usage history is not set up, as a DynamoDB
// store without its usage table: every write fails with an error matching
// errors.ErrUnsupported.
type noHistory struct {
	store.Store
	puts int
}

func (s *noHistory) PutUsage(context.Context, []store.UsageRow, store.UsageRetention) error {
	s.puts++
	return fmt.Errorf("usage table %q does not exist: %w", "t-usage", errors.ErrUnsupported)
}

func (s *noHistory) ListUsage(context.Context, store.UsageQuery) ([]store.UsageRow, error) {
	return nil, errors.ErrUnsupported
}

// TestUnsupportedDropped: a store that keeps no history refuses the rows
// for good; they are dropped after one try, with an event, rather than
// kept and sent again at every flush.
func TestUnsupportedDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		st := &noHistory{Store: mem}
		rec, _ := history.New(st)
		rec.Observer().Acquired(ctx, sluice.AcquireEvent{Dimensions: []sluice.Request{{Dimension: "openai#tpm", Cost: 1}}, Outcome: sluice.Granted})
		if err := rec.Flush(ctx); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Flush = %v, want the store's unsupported error", err)
		}
		if err := rec.Flush(ctx); err != nil {
			t.Fatalf("second Flush = %v, want the rows dropped", err)
		}
		if got, want := st.puts, 1; got != want {
			t.Errorf("writes = %d, want %d", got, want)
		}
		if ev := rec.Events(1); len(ev) != 1 || ev[0].Kind != history.EventStoreError {
			t.Errorf("events = %+v, want the refused write", ev)
		}
		if rec.Writes() {
			t.Error("Writes() = true after the store said it keeps no history")
		}
		// Its minutes come from the live view, not from the store.
		if got := query(t, rec, "openai#tpm", "", time.Minute).Grants; got != 1 {
			t.Errorf("grants by the minute = %d, want 1 from the live view", got)
		}
	})
}

// TestInvalidCallerDropsOnlyItsRows: an acquisition under a caller name no
// store takes (it failed, and is counted as an error) does not keep the
// dimension's other callers from being written.
func TestInvalidCallerDropsOnlyItsRows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		rec, _ := history.New(mem)
		obs := rec.Observer()
		for range 5 {
			obs.Acquired(ctx, sluice.AcquireEvent{Dimensions: []sluice.Request{{Dimension: "openai#tpm", Cost: 1}}, Caller: "web", Outcome: sluice.Granted})
		}
		obs.Acquired(ctx, sluice.AcquireEvent{Dimensions: []sluice.Request{{Dimension: "openai#tpm", Cost: 1}}, Caller: strings.Repeat("c", 201), Err: store.ErrInvalid})
		if err := rec.Flush(ctx); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Flush = %v, want the invalid caller's rows refused", err)
		}
		if err := rec.Flush(ctx); err != nil {
			t.Fatalf("second Flush = %v, want the invalid rows dropped", err)
		}
		reader, _ := history.New(mem)
		for _, step := range []time.Duration{time.Minute, time.Hour} {
			if got := query(t, reader, "openai#tpm", "web", step).Grants; got != 5 {
				t.Errorf("web's grants by the %v in the store = %d, want 5", step, got)
			}
		}
	})
}

// TestClockSetBack: the clock is set back into a minute a flush has
// already written and closed. The event is dated at the latest time the
// Recorder saw, so that the closed minute's row keeps its total instead of
// being replaced by a fresh row holding the late event alone.
func TestClockSetBack(t *testing.T) {
	mem := memstore.New()
	defer mem.Close()
	ctx := context.Background()
	// hh:01:05 two hours ago: within the store's retention of minute rows.
	at := time.Now().UTC().Truncate(time.Hour).Add(-2*time.Hour + 65*time.Second)
	first, second := at.Format("15:04"), at.Add(time.Minute).Format("15:04")
	rec, err := history.New(mem, history.WithClock(sluice.ClockFunc(func() time.Time { return at })))
	if err != nil {
		t.Fatal(err)
	}
	grant := func() {
		rec.Observer().Acquired(ctx, sluice.AcquireEvent{Dimensions: []sluice.Request{{Dimension: "openai#tpm", Cost: 1}}, Outcome: sluice.Granted})
	}
	for range 10 {
		grant()
	}
	flush := func() {
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	at = at.Add(time.Minute) // hh:02:05: the hh:01 row is closed and written
	flush()
	at = at.Add(-15 * time.Second) // set back to hh:01:50
	grant()
	flush()
	reader, _ := history.New(mem)
	ps, err := reader.Query(ctx, history.Query{Dimension: "openai#tpm", From: at.Add(-time.Hour), To: at.Add(time.Hour), Step: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, p := range ps {
		if p.Counts.Grants > 0 {
			got[p.Start.UTC().Format("15:04")] = p.Counts.Grants
		}
	}
	if want := map[string]int64{first: 10, second: 1}; !maps.Equal(got, want) {
		t.Errorf("grants by minute = %v, want %v", got, want)
	}
}

// TestClockSetBackKeepsWriting: the clock is set back within a minute
// a flush has written, and the minute's row changes again. Stores ignore
// a put older than the row they hold (a late put), so the Recorder's puts
// must keep getting later whatever its clock says: the row gets the new
// total.
func TestClockSetBackKeepsWriting(t *testing.T) {
	mem := memstore.New()
	defer mem.Close()
	ctx := context.Background()
	// hh:01:30 two hours ago: within the store's retention of minute rows.
	at := time.Now().UTC().Truncate(time.Hour).Add(-2*time.Hour + 90*time.Second)
	rec, err := history.New(mem, history.WithClock(sluice.ClockFunc(func() time.Time { return at })))
	if err != nil {
		t.Fatal(err)
	}
	grant := func(n int) {
		for range n {
			rec.Observer().Acquired(ctx, sluice.AcquireEvent{Dimensions: []sluice.Request{{Dimension: "openai#tpm", Cost: 1}}, Outcome: sluice.Granted})
		}
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	grant(10)
	at = at.Add(-20 * time.Second) // set back to hh:01:10
	grant(1)
	reader, _ := history.New(mem)
	for _, step := range []time.Duration{time.Minute, time.Hour} {
		ps, err := reader.Query(ctx, history.Query{Dimension: "openai#tpm", From: at.Add(-time.Hour), To: at.Add(time.Hour), Step: step})
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		for _, p := range ps {
			got += p.Counts.Grants
		}
		if got != 11 {
			t.Errorf("grants by the %v in the store = %d, want 11", step, got)
		}
	}
}
