package storetest

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// usageEnv is one usage test's store (a store.Usager) and a base time.
type usageEnv struct {
	t   *testing.T
	u   store.Usager
	ctx context.Context
	// base is a whole hour three hours before the test started: usage rows
	// expire by the wall clock (their retention counts from Start+Period),
	// so the group works near the present, well inside the default
	// retention, and never sleeps.
	base time.Time
}

func newUsageEnv(t *testing.T, h Harness) *usageEnv {
	t.Helper()
	s := contract.Unwrap(h.NewStore(t))
	if h.PrepareUsage != nil {
		h.PrepareUsage(t, s)
	}
	u, ok := s.(store.Usager)
	if !ok {
		t.Fatalf("storetest: %T does not implement store.Usager", s)
	}
	return &usageEnv{t: t, u: u, ctx: context.Background(),
		base: time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)}
}

// min returns the Start of minute k after base.
func (e *usageEnv) min(k int) time.Time { return e.base.Add(time.Duration(k) * time.Minute) }

// row builds a minute row at minute k.
func (e *usageEnv) row(dim, caller, writer string, k int, counters map[string]int64) store.UsageRow {
	return store.UsageRow{Dimension: dim, Caller: caller, Period: time.Minute, Start: e.min(k), Writer: writer,
		Counters: counters, Updated: e.min(k).Add(10*time.Second + 123*time.Millisecond)}
}

func (e *usageEnv) put(rows []store.UsageRow, r store.UsageRetention) {
	e.t.Helper()
	if err := e.u.PutUsage(e.ctx, rows, r); err != nil {
		e.t.Fatalf("PutUsage(%d rows): %v", len(rows), err)
	}
}

func (e *usageEnv) list(q store.UsageQuery) []store.UsageRow {
	e.t.Helper()
	rows, err := e.u.ListUsage(e.ctx, q)
	if err != nil {
		e.t.Fatalf("ListUsage(%+v): %v", q, err)
	}
	return rows
}

// minutes lists dim's minute rows from minute from to minute to.
func (e *usageEnv) minutes(dim string, from, to int) []store.UsageRow {
	e.t.Helper()
	return e.list(store.UsageQuery{Dimension: dim, Period: time.Minute, From: e.min(from), To: e.min(to)})
}

// wantRows checks that got holds exactly want, in any order.
func (e *usageEnv) wantRows(what string, got, want []store.UsageRow) {
	e.t.Helper()
	g, w := usageText(got), usageText(want)
	if !slices.Equal(g, w) {
		e.t.Errorf("%s: got %d rows\n  %s\nwant %d rows\n  %s", what, len(g), strings.Join(g, "\n  "), len(w), strings.Join(w, "\n  "))
	}
}

// usageText renders rows canonically (times in UTC to the millisecond,
// counters sorted, nil and empty counters alike), sorted.
func usageText(rows []store.UsageRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		var cs []string
		for _, k := range slices.Sorted(maps.Keys(r.Counters)) {
			cs = append(cs, fmt.Sprintf("%s=%d", k, r.Counters[k]))
		}
		upd := "-"
		if !r.Updated.IsZero() {
			upd = r.Updated.UTC().Format("15:04:05.000")
		}
		out[i] = fmt.Sprintf("%s|%q|%s|%s|%q|{%s}|%s", r.Dimension, r.Caller, r.Period,
			r.Start.UTC().Format(time.RFC3339Nano), r.Writer, strings.Join(cs, ","), upd)
	}
	slices.Sort(out)
	return out
}

// sumUsage sums a counter over rows.
func sumUsage(rows []store.UsageRow, counter string) int64 {
	var n int64
	for _, r := range rows {
		n += r.Counters[counter]
	}
	return n
}

// testUsage is the conformance group of store.Usager.
func testUsage(t *testing.T, h Harness) {
	var none store.UsageRetention // the defaults
	t.Run("RoundTrip", func(t *testing.T) {
		e := newUsageEnv(t, h)
		rows := []store.UsageRow{
			e.row("openai#rpm", "", "w1", 0, map[string]int64{"grants": 3, "refusals": 1}),
			e.row("openai#rpm", "alice", "w1", 0, map[string]int64{"grants": 7, "min_remaining": -1}),
			e.row("openai#rpm", "alice", "w1", 1, map[string]int64{"grants": 1 << 40, "max": math.MaxInt64, "min": math.MinInt64}),
			e.row("openai#rpm", "bob|x:y", "w1", 2, nil),
		}
		e.put(rows, none)
		e.wantRows("all", e.minutes("openai#rpm", 0, 60), rows)
		e.wantRows("another dimension", e.minutes("openai#tpm", 0, 60), nil)
		e.put(nil, none) // nothing to write is not an error
	})
	t.Run("ReplaceNotAdd", func(t *testing.T) {
		e := newUsageEnv(t, h)
		first := []store.UsageRow{e.row("openai#rpm", "alice", "w1", 0, map[string]int64{"grants": 1, "errors": 4})}
		e.put(first, none)
		e.put(first, none) // a resend
		e.wantRows("put twice", e.minutes("openai#rpm", 0, 60), first)
		second := []store.UsageRow{e.row("openai#rpm", "alice", "w1", 0, map[string]int64{"grants": 5})}
		second[0].Updated = second[0].Updated.Add(10 * time.Second)
		e.put(second, none)
		e.put(second, none)
		e.wantRows("replaced whole (the counter absent from the second put is gone)", e.minutes("openai#rpm", 0, 60), second)
	})
	t.Run("LatePutIgnored", func(t *testing.T) {
		e := newUsageEnv(t, h)
		early := e.row("openai#rpm", "alice", "w1", 0, map[string]int64{"grants": 3})
		late := early
		late.Counters, late.Updated = map[string]int64{"grants": 5}, early.Updated.Add(10*time.Second)
		other := e.row("openai#rpm", "bob", "w1", 0, map[string]int64{"grants": 1})
		e.put([]store.UsageRow{late}, none)
		e.put([]store.UsageRow{early, other}, none) // the earlier put, arriving last
		e.wantRows("an earlier put after a later one", e.minutes("openai#rpm", 0, 60), []store.UsageRow{late, other})
		sub := late
		sub.Updated = late.Updated.Add(999 * time.Microsecond) // the same millisecond
		sub.Counters = map[string]int64{"grants": 6}
		e.put([]store.UsageRow{sub}, none)
		e.wantRows("a put of the same millisecond replaces", e.minutes("openai#rpm", 0, 60), []store.UsageRow{sub, other})
		e.put([]store.UsageRow{late}, none) // a resend of the put it replaced
		e.wantRows("a resend of the same millisecond replaces", e.minutes("openai#rpm", 0, 60), []store.UsageRow{late, other})
		newer := late
		newer.Counters, newer.Updated = map[string]int64{"grants": 9}, late.Updated.Add(10*time.Second)
		e.put([]store.UsageRow{newer, early}, none) // one put naming the row twice
		e.wantRows("the later of two rows in one put", e.minutes("openai#rpm", 0, 60), []store.UsageRow{newer, other})
	})
	t.Run("WritersKeptApart", func(t *testing.T) {
		e := newUsageEnv(t, h)
		rows := []store.UsageRow{
			e.row("openai#rpm", "alice", "w1", 5, map[string]int64{"grants": 3}),
			e.row("openai#rpm", "alice", "w2", 5, map[string]int64{"grants": 4}),
		}
		e.put(rows[:1], none)
		e.put(rows[1:], none)
		got := e.minutes("openai#rpm", 0, 60)
		e.wantRows("two writers", got, rows)
		if n := sumUsage(got, "grants"); n != 7 {
			e.t.Errorf("grants summed over writers = %d, want 7", n)
		}
	})
	t.Run("CallersKeptApart", func(t *testing.T) {
		e := newUsageEnv(t, h)
		var rows []store.UsageRow
		for i, c := range []string{"", "alice", "bob", "Alice", "caller with spaces/and|bars", "ünï"} {
			rows = append(rows, e.row("openai#rpm", c, "w1", 5, map[string]int64{"grants": int64(i + 1)}))
		}
		e.put(rows, none)
		e.wantRows("callers", e.minutes("openai#rpm", 0, 60), rows)
	})
	t.Run("Range", func(t *testing.T) { testUsageRange(t, h) })
	t.Run("Periods", func(t *testing.T) {
		e := newUsageEnv(t, h)
		m := e.row("openai#rpm", "alice", "w1", 0, map[string]int64{"grants": 1})
		hr := m
		hr.Period, hr.Counters = time.Hour, map[string]int64{"grants": 60}
		e.put([]store.UsageRow{m, hr}, none)
		e.wantRows("minute rows", e.minutes("openai#rpm", 0, 60), []store.UsageRow{m})
		e.wantRows("hour rows", e.list(store.UsageQuery{Dimension: "openai#rpm", Period: time.Hour, From: e.min(0), To: e.min(60)}), []store.UsageRow{hr})
	})
	t.Run("BadInput", func(t *testing.T) { testUsageBadInput(t, h) })
	t.Run("Retention", func(t *testing.T) { testUsageRetention(t, h) })
	t.Run("Concurrent", func(t *testing.T) { testUsageConcurrent(t, h) })
	t.Run("Model", func(t *testing.T) { testUsageModel(t, h) })
}

// testUsageRange checks the bounds [From, To) and a day of minute rows
// put in one call and read back in one.
func testUsageRange(t *testing.T, h Harness) {
	e := newUsageEnv(t, h)
	var none store.UsageRetention
	var rows []store.UsageRow
	for k := range 5 {
		rows = append(rows, e.row("openai#rpm", "alice", "w1", k, map[string]int64{"grants": int64(k)}))
	}
	other := e.row("anthropic#rpm", "alice", "w1", 2, map[string]int64{"grants": 99})
	e.put(rows, none)
	e.put([]store.UsageRow{other}, none)
	tests := []struct {
		name     string
		from, to int
		want     []store.UsageRow
	}{
		{"all", 0, 5, rows},
		{"from is inclusive, to exclusive", 1, 3, rows[1:3]},
		{"empty range", 2, 2, nil},
		{"before every row", -10, 0, nil},
		{"after every row", 5, 100, nil},
	}
	for _, tt := range tests {
		e.wantRows(tt.name, e.minutes("openai#rpm", tt.from, tt.to), tt.want)
	}
	e.wantRows("the other dimension", e.minutes("anthropic#rpm", 0, 5), []store.UsageRow{other})

	// A day of minute rows, ending at base + 2h, over a day boundary
	// whatever the hour of the run.
	var day []store.UsageRow
	for k := -1320; k < 120; k++ {
		day = append(day, e.row("openai#tpm", "", "w1", k, map[string]int64{"reserved": int64(k + 2000)}))
	}
	e.put(day, none)
	got := e.minutes("openai#tpm", -1320, 120)
	e.wantRows("a day of minutes", got, day)
	e.wantRows("an hour of it", e.minutes("openai#tpm", -61, -1), day[1320-61:1320-1])
}

// testUsageBadInput checks that every invalid put or query fails with an
// error matching store.ErrInvalid that names the field and value, and
// that a put with one bad row writes none of its rows.
func testUsageBadInput(t *testing.T, h Harness) {
	e := newUsageEnv(t, h)
	var none store.UsageRetention
	good := func() store.UsageRow {
		return e.row("openai#rpm", "alice", "w1", 0, map[string]int64{"grants": 1})
	}
	with := func(mut func(*store.UsageRow)) []store.UsageRow {
		r := good()
		mut(&r)
		return []store.UsageRow{good(), r}
	}
	puts := []struct {
		name    string
		rows    []store.UsageRow
		ret     store.UsageRetention
		mention []string
	}{
		{"empty dimension", with(func(r *store.UsageRow) { r.Dimension = "" }), none, []string{"usage row 1", "dimension"}},
		{"dimension with braces", with(func(r *store.UsageRow) { r.Dimension = "{openai}#rpm" }), none, []string{"dimension", "{openai}#rpm"}},
		{"two dimensions", with(func(r *store.UsageRow) { r.Dimension = "openai#tpm" }), none, []string{"dimension", "openai#tpm", "openai#rpm"}},
		{"zero period", with(func(r *store.UsageRow) { r.Period = 0 }), none, []string{"period", "0s"}},
		{"a day's period", with(func(r *store.UsageRow) { r.Period = 24 * time.Hour }), none, []string{"period", "24h0m0s"}},
		{"start not aligned", with(func(r *store.UsageRow) { r.Start = r.Start.Add(time.Second) }), none, []string{"start", e.min(0).Add(time.Second).Format(time.RFC3339)}},
		{"start of a minute row in an hour row", with(func(r *store.UsageRow) { r.Start, r.Period = e.min(1), time.Hour }), none, []string{"start", e.min(1).Format(time.RFC3339)}},
		{"start before the epoch", with(func(r *store.UsageRow) { r.Start = time.Unix(-60, 0) }), none, []string{"start", "1969-12-31T23:59:00Z"}},
		{"empty writer", with(func(r *store.UsageRow) { r.Writer = "" }), none, []string{"writer"}},
		{"writer too long", with(func(r *store.UsageRow) { r.Writer = strings.Repeat("w", store.MaxWriterLen+1) }), none, []string{"writer", "www"}},
		{"caller too long", with(func(r *store.UsageRow) { r.Caller = strings.Repeat("c", store.MaxCallerLen+1) }), none, []string{"caller", "ccc"}},
		{"caller not UTF-8", with(func(r *store.UsageRow) { r.Caller = "a\xffb" }), none, []string{"caller"}},
		{"empty counter name", with(func(r *store.UsageRow) { r.Counters = map[string]int64{"": 1} }), none, []string{"counter name"}},
		{"no updated time", with(func(r *store.UsageRow) { r.Updated = time.Time{} }), none, []string{"updated", "0001-01-01T00:00:00Z"}},
		{"negative minute retention", []store.UsageRow{good()}, store.UsageRetention{Minute: -time.Hour}, []string{"retention.minute", "-1h0m0s"}},
		{"negative hour retention", []store.UsageRow{good()}, store.UsageRetention{Hour: -time.Second}, []string{"retention.hour", "-1s"}},
	}
	for _, tt := range puts {
		err := e.u.PutUsage(e.ctx, tt.rows, tt.ret)
		wantErr(t, "PutUsage: "+tt.name, err, store.ErrInvalid, tt.mention...)
	}
	e.wantRows("after the bad puts", e.minutes("openai#rpm", -60, 60), nil)

	q := func(mut func(*store.UsageQuery)) store.UsageQuery {
		q := store.UsageQuery{Dimension: "openai#rpm", Period: time.Minute, From: e.min(0), To: e.min(60)}
		mut(&q)
		return q
	}
	queries := []struct {
		name    string
		q       store.UsageQuery
		mention []string
	}{
		{"empty dimension", q(func(q *store.UsageQuery) { q.Dimension = "" }), []string{"dimension"}},
		{"control character", q(func(q *store.UsageQuery) { q.Dimension = "openai#\x01rpm" }), []string{"dimension", `openai#\x01rpm`}},
		{"period", q(func(q *store.UsageQuery) { q.Period = time.Second }), []string{"period", "1s"}},
		{"to before from", q(func(q *store.UsageQuery) { q.To = e.min(-1) }), []string{"to", e.min(-1).Format(time.RFC3339)}},
	}
	for _, tt := range queries {
		_, err := e.u.ListUsage(e.ctx, tt.q)
		wantErr(t, "ListUsage: "+tt.name, err, store.ErrInvalid, tt.mention...)
	}
}

// testUsageRetention checks that rows past their retention are neither
// stored nor listed, and that those within it are, for both periods.
func testUsageRetention(t *testing.T, h Harness) {
	e := newUsageEnv(t, h)
	hourAgo := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	short := store.UsageRetention{Minute: time.Hour, Hour: 2 * time.Hour}
	// Minute rows: base is 3h ago; with a 1h retention a row must have
	// ended within the last hour to be kept.
	old := e.row("openai#rpm", "alice", "w1", 0, map[string]int64{"grants": 1})
	k := int(time.Now().UTC().Truncate(time.Minute).Add(-20*time.Minute).Sub(e.base) / time.Minute)
	recent := e.row("openai#rpm", "alice", "w1", k, map[string]int64{"grants": 2}) // ended 19 minutes ago
	e.put([]store.UsageRow{old, recent}, short)
	e.wantRows("minute rows under a 1h retention", e.minutes("openai#rpm", -600, 600), []store.UsageRow{recent})
	// Hour rows: one that ended 3h ago and one that ended at most an hour
	// ago, under a 2h retention.
	h1 := store.UsageRow{Dimension: "openai#rpm", Period: time.Hour, Start: hourAgo.Add(-3 * time.Hour), Writer: "w1", Counters: map[string]int64{"grants": 3}, Updated: hourAgo}
	h2 := h1
	h2.Start, h2.Counters = hourAgo, map[string]int64{"grants": 4}
	e.put([]store.UsageRow{h1, h2}, short)
	got := e.list(store.UsageQuery{Dimension: "openai#rpm", Period: time.Hour, From: hourAgo.Add(-24 * time.Hour), To: hourAgo.Add(24 * time.Hour)})
	e.wantRows("hour rows under a 2h retention", got, []store.UsageRow{h2})
	// The default retention keeps the old minute row.
	e.put([]store.UsageRow{old}, store.UsageRetention{})
	e.wantRows("the old row under the default retention", e.minutes("openai#rpm", 0, 1), []store.UsageRow{old})
}

// testUsageConcurrent runs writers on one (dimension, caller, minute) and
// on rows of their own at once, each putting growing totals and sending
// each put twice, and checks the exact totals.
func testUsageConcurrent(t *testing.T, h Harness) {
	e := newUsageEnv(t, h)
	writers := min(cmp.Or(h.Goroutines, 64), 16)
	const puts = 12
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			writer := fmt.Sprintf("writer-%02d", w)
			for n := int64(1); n <= puts; n++ {
				rows := []store.UsageRow{
					e.row("openai#rpm", "shared", writer, 0, map[string]int64{"grants": n, "waits": 2 * n}),
					e.row("openai#rpm", "shared", writer, 1, map[string]int64{"grants": n}),
					e.row("openai#rpm", writer, writer, 0, map[string]int64{"grants": 100 * n}),
				}
				for i := range rows { // each put later than the one before
					rows[i].Updated = rows[i].Updated.Add(time.Duration(n) * time.Millisecond)
				}
				for range 2 { // a resend
					if err := e.u.PutUsage(e.ctx, rows, store.UsageRetention{}); err != nil {
						errs <- fmt.Errorf("%s: put %d: %w", writer, n, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := e.minutes("openai#rpm", 0, 1)
	var shared, own []store.UsageRow
	for _, r := range got {
		if r.Caller == "shared" {
			shared = append(shared, r)
		} else {
			own = append(own, r)
		}
	}
	if len(shared) != writers || len(own) != writers {
		t.Errorf("minute 0: %d shared rows and %d own rows, want %d each", len(shared), len(own), writers)
	}
	if g, w := sumUsage(shared, "grants"), int64(writers*puts); g != w {
		t.Errorf("shared grants summed = %d, want %d", g, w)
	}
	if g, w := sumUsage(shared, "waits"), int64(2*writers*puts); g != w {
		t.Errorf("shared waits summed = %d, want %d", g, w)
	}
	if g, w := sumUsage(own, "grants"), int64(100*writers*puts); g != w {
		t.Errorf("own grants summed = %d, want %d", g, w)
	}
	if g, w := sumUsage(e.minutes("openai#rpm", 1, 2), "grants"), int64(writers*puts); g != w {
		t.Errorf("minute 1 grants summed = %d, want %d", g, w)
	}
}
