package history_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
)

// TestLiveView: the per-second view has one point per second with that
// second's counts, forgets what is older than its window, and Live sums
// the last minute.
func TestLiveView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		rec, _ := history.New(mem, history.WithLiveWindow(2*time.Minute))
		c := newClient(t, mem, rec.Observer())
		start := time.Now()
		// Second k sees k%3 grants, as "web" on even seconds, else "batch".
		for k := range 150 {
			for range k % 3 {
				caller := "batch"
				if k%2 == 0 {
					caller = "web"
				}
				if _, err := c.Acquire(ctx, "openai#tpm", sluice.WithCaller(caller)); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Second)
		}
		ps, err := rec.Query(ctx, history.Query{Dimension: "openai#tpm", From: start, To: start.Add(150 * time.Second), Step: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 150 {
			t.Fatalf("%d points, want 150", len(ps))
		}
		for k, p := range ps {
			want := int64(k % 3)
			if k < 150-120+1 { // outside the 2-minute window
				want = 0
			}
			if !p.Start.Equal(start.Add(time.Duration(k) * time.Second).UTC()) {
				t.Errorf("point %d starts at %s, want %s", k, p.Start, start.Add(time.Duration(k)*time.Second).UTC())
			}
			if p.Counts.Grants != want {
				t.Errorf("second %d: %d grants, want %d", k, p.Counts.Grants, want)
			}
		}
		web, err := rec.Query(ctx, history.Query{Dimension: "openai#tpm", Caller: "web", From: start.Add(140 * time.Second), To: start.Add(150 * time.Second), Step: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		for _, p := range web {
			got += p.Counts.Grants
		}
		// Seconds 140..149: even ones with k%3 grants: 140→2, 142→1, 144→0, 146→2, 148→1.
		if got != 6 {
			t.Errorf("web's grants in the last 10 s = %d, want 6", got)
		}
		// The last 60 seconds, 90 to 149: 20 of each of 0, 1, 2 grants.
		if got := rec.Live("openai#tpm").Grants; got != 60 {
			t.Errorf("Live grants = %d, want 60", got)
		}
		if got := rec.Live("anthropic#tpm"); got.Grants != 0 || got.MinRemaining != -1 || len(got.WaitHist) != len(history.WaitBounds)+1 {
			t.Errorf("Live of an idle dimension = %+v, want zero counts, MinRemaining -1 and a histogram", got)
		}
	})
}

// TestCallers: totals by caller, from the store (every writer) and from
// memory.
func TestCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		w := newWant()
		a, _ := history.New(mem)
		b, _ := history.New(mem)
		load(t, newClient(t, mem, a.Observer(), w.observer()), dims, callers, 3, 10, time.Second)
		load(t, newClient(t, mem, b.Observer(), w.observer()), dims, callers, 3, 10, time.Second)
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		got, err := a.Callers(ctx, dims[0], now.Add(-time.Hour), now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		for _, caller := range callers {
			if g, want := compared(got[caller]), w.of(dims[0], caller); g != want {
				t.Errorf("caller %q: got %+v, want %+v", caller, g, want)
			}
		}
		// A week back reads the hour rows: the same totals.
		week, err := a.Callers(ctx, dims[0], now.Add(-7*24*time.Hour), now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Errorf("callers of %s: %d, want 2 (web and \"\")", dims[0], len(got))
		}
		for caller, c := range got {
			if compared(week[caller]) != compared(c) {
				t.Errorf("caller %q over a week: %+v, over an hour %+v", caller, compared(week[caller]), compared(c))
			}
		}
	})
}

// TestLiveOnly: over a store that keeps no usage history the Recorder
// writes nothing, and answers minutes from its live view.
func TestLiveOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		st := liveOnly{mem}
		rec, _ := history.New(st)
		if rec.Writes() {
			t.Fatal("Writes() = true over a store without usage history")
		}
		w := newWant()
		load(t, newClient(t, mem, rec.Observer(), w.observer()), dims, callers, 3, 10, time.Second)
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if rows, err := mem.ListUsage(ctx, store.UsageQuery{Dimension: dims[0], Period: time.Minute, From: time.Unix(0, 0), To: time.Now().Add(time.Hour)}); err != nil || len(rows) != 0 {
			t.Errorf("the store has %d rows (%v), want none", len(rows), err)
		}
		if got, want := query(t, rec, dims[0], "", time.Minute), w.total(dims[0], ""); got != want {
			t.Errorf("minutes from the live view: %+v, want %+v", got, want)
		}
		ctx2, cancel := context.WithCancel(ctx)
		cancel()
		if err := rec.Run(ctx2); err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
}

// TestEviction: past WithMaxSeries, the series used the longest ago leaves the
// live view, and its totals still reach the store exactly, also when it
// comes back within the same minute.
func TestEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		rec, _ := history.New(mem, history.WithMaxSeries(2))
		w := newWant()
		c := newClient(t, mem, rec.Observer(), w.observer())
		for round := range 3 {
			for i, caller := range []string{"a", "b", "c", "a", "d"} {
				if _, err := c.Acquire(ctx, "openai#tpm", sluice.WithCaller(caller)); err != nil {
					t.Fatal(err)
				}
				if round == 1 && i == 2 {
					if err := rec.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(time.Second)
			}
		}
		checkTotals(t, rec, w, "openai#tpm", []string{"a", "b", "c", "d"})
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		reader, _ := history.New(mem)
		checkTotals(t, reader, w, "openai#tpm", []string{"a", "b", "c", "d"})
		// The live view keeps the last two callers only: "a" and "d".
		got, _ := rec.Callers(ctx, "openai#tpm", time.Now().Add(-time.Minute), time.Now())
		if len(got) != 4 {
			t.Errorf("callers from the store: %d, want 4", len(got))
		}
		live, _ := history.New(liveOnly{mem}, history.WithMaxSeries(2))
		lc := newClient(t, mem, live.Observer())
		for _, caller := range []string{"a", "b", "c"} {
			_, _ = lc.Acquire(ctx, "openai#tpm", sluice.WithCaller(caller))
		}
		got, _ = live.Callers(ctx, "openai#tpm", time.Now().Add(-time.Minute), time.Now().Add(time.Second))
		if _, ok := got["a"]; ok || len(got) != 2 {
			t.Errorf("live callers = %v, want b and c only", got)
		}
	})
}

// TestTransportEvent: vendor responses by class, the lowest remaining by
// dimension, and unmetered calls.
func TestTransportEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		defer mem.Close()
		ctx := context.Background()
		rec, _ := history.New(mem, history.WithTransportCaller("svc"))
		admitted := []vendors.Charge{{Metric: vendors.Requests, Dimension: "openai#rpm", Amount: 1}, {Metric: vendors.Tokens, Dimension: "openai#tpm", Amount: 100}}
		reaction := func(status int, m vendors.Metric, remReq, remTok int64) *vendors.Reaction {
			sig := vendors.Signals{Metrics: map[vendors.Metric]vendors.MetricSignals{}}
			if remReq >= 0 {
				sig.Metrics[vendors.Requests] = vendors.MetricSignals{Remaining: vendors.Count{Value: remReq, Known: true}, Granularity: 1}
			}
			if remTok >= 0 {
				sig.Metrics[vendors.Tokens] = vendors.MetricSignals{Remaining: vendors.Count{Value: remTok, Known: true}, Granularity: 1}
			}
			return &vendors.Reaction{Classification: vendors.Classification{Status: status, Metric: m, Signals: sig}}
		}
		for _, e := range []transport.Event{
			{Vendor: vendors.OpenAI, Outcome: transport.Settled, Status: 200, Admitted: admitted, Reaction: reaction(200, "", 499, 29_000)},
			{Vendor: vendors.OpenAI, Outcome: transport.Settled, Status: 200, Admitted: admitted, Reaction: reaction(200, "", 480, 31_000)},
			{Vendor: vendors.OpenAI, Outcome: transport.Rejected, Status: 429, Admitted: admitted, Reaction: reaction(429, vendors.Tokens, -1, -1)},
			{Vendor: vendors.OpenAI, Outcome: transport.Rejected, Status: 429, Admitted: admitted, Reaction: reaction(429, vendors.Requests, -1, -1)},
			{Vendor: vendors.OpenAI, Outcome: transport.Rejected, Status: 429, Admitted: admitted, Reaction: reaction(429, "", -1, -1)},
			{Vendor: vendors.OpenAI, Outcome: transport.Rejected, Status: 400, Admitted: admitted, Reaction: reaction(400, "", -1, -1)},
			{Vendor: vendors.OpenAI, Outcome: transport.Failed, Status: 503, Admitted: admitted},
			{Vendor: vendors.OpenAI, Outcome: transport.Charged, Status: 0, Admitted: admitted, Err: errors.New("reset")},
			{Vendor: vendors.OpenAI, Outcome: transport.Denied, Admitted: nil, Err: errors.New("no slot")},
			{Vendor: vendors.OpenAI, Outcome: transport.Passed, Status: 200, PassReason: "unknown endpoint"},
		} {
			if e.Status == 400 {
				e.Reaction.Resized = []string{"openai#tpm"}
			}
			rec.TransportEvent(ctx, e)
		}
		want := map[string]int64{"2xx": 2, "429_tokens": 1, "429_requests": 1, "429_other": 1, "4xx": 1, "5xx": 1, "error": 1}
		for _, dim := range []string{"openai#rpm", "openai#tpm"} {
			got := query1(t, rec, history.Query{Dimension: dim, Caller: "svc", Step: time.Minute})
			if fmt.Sprint(got.Responses) != fmt.Sprint(want) {
				t.Errorf("%s responses = %v, want %v", dim, got.Responses, want)
			}
			if got.Unmetered != 0 {
				t.Errorf("%s unmetered = %d, want 0", dim, got.Unmetered)
			}
		}
		if got := query1(t, rec, history.Query{Dimension: "openai#rpm", Step: time.Minute}).MinRemaining; got != 480 {
			t.Errorf("openai#rpm MinRemaining = %d, want 480", got)
		}
		if got := query1(t, rec, history.Query{Dimension: "openai#tpm", Step: time.Second}).MinRemaining; got != 29_000 {
			t.Errorf("openai#tpm MinRemaining = %d, want 29000", got)
		}
		if ev := rec.Events(5); len(ev) != 1 || ev[0].Kind != history.EventLimit || ev[0].Dimension != "openai#tpm" {
			t.Errorf("events = %+v, want one limit change of openai#tpm", ev)
		}
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		reader, _ := history.New(mem)
		if got := query1(t, reader, history.Query{Dimension: "openai#tpm", Step: time.Hour}).MinRemaining; got != 29_000 {
			t.Errorf("openai#tpm MinRemaining from the store = %d, want 29000", got)
		}
		got := query1(t, reader, history.Query{Dimension: "openai", Step: time.Minute})
		if got.Unmetered != 1 || got.Responses["2xx"] != 1 {
			t.Errorf("unmetered under the vendor's name: %+v, want 1 unmetered 2xx", got)
		}
	})
}

// query1 sums the points of q over the last hour, Counts whole.
func query1(t *testing.T, r *history.Recorder, q history.Query) history.Counts {
	t.Helper()
	q.From, q.To = time.Now().Add(-time.Hour), time.Now().Add(time.Second)
	if q.Step == time.Second {
		q.From = time.Now().Add(-time.Minute)
	}
	ps, err := r.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	sum := history.Counts{MinRemaining: -1}
	for _, p := range ps {
		c := p.Counts
		sum.Unmetered += c.Unmetered
		if c.MinRemaining >= 0 && (sum.MinRemaining < 0 || c.MinRemaining < sum.MinRemaining) {
			sum.MinRemaining = c.MinRemaining
		}
		for k, v := range c.Responses {
			if sum.Responses == nil {
				sum.Responses = map[string]int64{}
			}
			sum.Responses[k] += v
		}
	}
	return sum
}
