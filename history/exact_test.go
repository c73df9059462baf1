package history_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/store/memstore"
)

var (
	dims    = []string{"openai#tpm", "anthropic#tpm"}
	callers = []string{"web", "batch", ""}
)

// TestExactWhileRunning: eight goroutines acquire, wait and settle through
// a Client over two minutes and across an hour, while Run flushes every
// 10 s; after Run's last flush, the store's totals at a minute and an hour
// step, for every caller and all, are what the Client reported, and the
// grants the leases the goroutines got (and the reservations of waits
// that gave them back).
func TestExactWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Hour - 70*time.Second) // cross an hour and minutes
		mem := memstore.New()
		defer mem.Close()
		us := newUsageStore(t, mem)
		rec, err := history.New(us)
		if err != nil {
			t.Fatal(err)
		}
		w := newWant()
		c := newClient(t, mem, rec.Observer(), w.observer())
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()
		leases, failedWaits := load(t, c, dims, callers, 8, 60, 2*time.Second)
		stop()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		for _, d := range dims {
			checkTotals(t, rec, w, d, callers)
		}
		var got int64
		for _, d := range dims {
			got += query(t, rec, d, "", time.Minute).Grants
		}
		// A wait whose reservation was granted but whose deadline came
		// before the reservation was valid gave it back: the Client
		// reported the grant, and the goroutine got no lease.
		if got < leases || got > leases+failedWaits {
			t.Errorf("grants recorded = %d, the goroutines got %d leases and %d waits none", got, leases, failedWaits)
		}
		// A reader with nothing in memory reads the store alone.
		reader, _ := history.New(mem)
		for _, d := range dims {
			checkTotals(t, reader, w, d, callers)
		}
		if w.total(dims[0], "").Refusals == 0 || w.total(dims[0], "").Waits == 0 || w.total(dims[0], "").Debt == 0 {
			t.Errorf("the load made no refusal, wait or debt: %+v", w.total(dims[0], ""))
		}
	})
}

// TestExactBeforeFlush: what a Recorder has not written yet is counted
// from its memory, once: before any flush, between two, and after.
func TestExactBeforeFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		rec, _ := history.New(mem)
		w := newWant()
		c := newClient(t, mem, rec.Observer(), w.observer())
		ctx := context.Background()
		load(t, c, dims, callers, 4, 10, 2*time.Second)
		checkTotals(t, rec, w, dims[0], callers) // nothing written yet
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		load(t, c, dims, callers, 4, 10, 2*time.Second)
		checkTotals(t, rec, w, dims[0], callers) // half written
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		checkTotals(t, rec, w, dims[0], callers)
	})
}

// TestTwoWriters: two processes' Recorders write to one store; either
// reads the sum of both, exactly.
func TestTwoWriters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		w := newWant()
		var recs [2]*history.Recorder
		done := make(chan struct{})
		for i := range recs {
			recs[i], _ = history.New(mem)
			c := newClient(t, mem, recs[i].Observer(), w.observer())
			go func() {
				load(t, c, dims, callers, 3, 20, 2*time.Second)
				done <- struct{}{}
			}()
		}
		<-done
		<-done
		if recs[0].Writer() == recs[1].Writer() {
			t.Fatalf("two recorders share the writer id %q", recs[0].Writer())
		}
		for _, r := range recs {
			if err := r.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range recs {
			for _, d := range dims {
				checkTotals(t, r, w, d, callers)
			}
		}
	})
}

// TestResentWrites: a flush without changes writes nothing, and a write
// the store receives twice (a driver's resend) counts once.
func TestResentWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		us := newUsageStore(t, mem)
		us.twice = true
		rec, _ := history.New(us)
		w := newWant()
		c := newClient(t, mem, rec.Observer(), w.observer())
		load(t, c, dims, callers, 3, 10, time.Second)
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		before := us.calls()
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if after := us.calls(); len(after) != len(before) || after[dims[0]] != before[dims[0]] || after[dims[1]] != before[dims[1]] {
			t.Errorf("a flush without changes wrote: calls %v, then %v", before, after)
		}
		reader, _ := history.New(mem)
		for _, d := range dims {
			checkTotals(t, reader, w, d, callers)
		}
	})
}

// TestRestart: a process stops (Close) and another starts with a new
// writer id within the same minute and hour; the totals over both are
// exact.
func TestRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		w := newWant()
		first, _ := history.New(mem)
		c := newClient(t, mem, first.Observer(), w.observer())
		load(t, c, dims, callers, 3, 5, time.Second)
		if err := first.Close(ctx); err != nil {
			t.Fatal(err)
		}
		// After Close, the first recorder counts nothing more.
		live := first.Live(dims[0]).Grants
		c0 := newClient(t, mem, first.Observer())
		if res, err := c0.Acquire(ctx, dims[0]); err != nil || !res.Granted() {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		if got := first.Live(dims[0]).Grants; got != live {
			t.Errorf("after Close, live grants went from %d to %d", live, got)
		}
		second, _ := history.New(mem)
		if second.Writer() == first.Writer() {
			t.Fatal("the new recorder has the old one's writer id")
		}
		c2 := newClient(t, mem, second.Observer(), w.observer())
		load(t, c2, dims, callers, 3, 5, time.Second)
		for _, d := range dims {
			checkTotals(t, second, w, d, callers) // the second's not yet written
		}
		if err := second.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for _, d := range dims {
			checkTotals(t, second, w, d, callers)
		}
	})
}

// TestFlushFailure: failed writes, one of them reaching the store though
// its answer was lost, keep their rows for the next flush; the totals
// stay exact throughout, and the failure is an event.
func TestFlushFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		us := newUsageStore(t, mem)
		rec, _ := history.New(us)
		w := newWant()
		c := newClient(t, mem, rec.Observer(), w.observer())
		load(t, c, dims, callers, 3, 10, time.Second)
		us.fail, us.written = 1, true // the first written, its answer lost
		if err := rec.Flush(ctx); !errors.Is(err, errInjected) {
			t.Fatalf("Flush = %v, want the injected failure", err)
		}
		checkTotals(t, rec, w, dims[0], callers)
		load(t, c, dims, callers, 3, 10, time.Second)
		us.fail, us.written = 2, false
		if err := rec.Flush(ctx); !errors.Is(err, errInjected) {
			t.Fatalf("Flush = %v, want the injected failure", err)
		}
		checkTotals(t, rec, w, dims[1], callers)
		if err := rec.Flush(ctx); err != nil {
			t.Fatalf("Flush after the failures = %v", err)
		}
		reader, _ := history.New(mem)
		for _, d := range dims {
			checkTotals(t, reader, w, d, callers)
		}
		if ev := rec.Events(10); len(ev) == 0 || ev[0].Kind != history.EventStoreError {
			t.Errorf("events = %+v, want a store error first", ev)
		}
	})
}

// TestQueryDuringFlush: a Query made while a flush's write is in flight,
// before it reaches the store and after, counts every total once.
func TestQueryDuringFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		us := newUsageStore(t, mem)
		rec, _ := history.New(us)
		w := newWant()
		c := newClient(t, mem, rec.Observer(), w.observer())
		var checked int
		us.around = func(string) {
			checked++
			for _, d := range dims {
				checkTotals(t, rec, w, d, callers)
			}
		}
		for range 3 {
			load(t, c, dims, callers, 3, 10, 5*time.Second)
			if err := rec.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if checked == 0 {
			t.Fatal("no query ran during a flush")
		}
	})
}
