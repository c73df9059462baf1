package pgstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
)

// partitions returns the partitions of a usage table, sorted.
func partitions(t *testing.T, s *Store, table string) []string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT c.relname FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
JOIN pg_namespace n ON n.oid = p.relnamespace WHERE n.nspname = $1 AND p.relname = $2`, s.schema, table)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// TestUsagePartitions checks that puts create the daily and monthly
// partitions their rows need, and the next one, and that a put drops
// whole the partitions past its retention, from another process too.
func TestUsagePartitions(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	old := today.AddDate(0, 0, -3).Add(5 * time.Hour)
	minute := func(start time.Time) store.UsageRow {
		return store.UsageRow{Dimension: "openai#rpm", Period: time.Minute, Start: start, Writer: "w1", Counters: map[string]int64{"grants": 1}, Updated: start}
	}
	long := store.UsageRetention{Minute: 10 * 24 * time.Hour}
	if err := s.PutUsage(ctx, []store.UsageRow{minute(old), minute(today)}, long); err != nil {
		t.Fatal(err)
	}
	day := func(t time.Time) string { return "usage_minute_" + t.Format("20060102") }
	// The partition after the newest row's is created ahead.
	want := []string{day(old), day(today), day(today.AddDate(0, 0, 1))}
	if got := partitions(t, s, "usage_minute"); !slices.Equal(got, want) {
		t.Errorf("partitions = %v, want %v", got, want)
	}
	hour := store.UsageRow{Dimension: "openai#rpm", Period: time.Hour, Start: today, Writer: "w1", Updated: today}
	if err := s.PutUsage(ctx, []store.UsageRow{hour}, store.UsageRetention{}); err != nil {
		t.Fatal(err)
	}
	month := func(t time.Time) string { return "usage_hour_" + t.Format("200601") }
	if got, want := partitions(t, s, "usage_hour"), []string{month(today), month(today.AddDate(0, 1, 0))}; !slices.Equal(got, want) {
		t.Errorf("hour partitions = %v, want %v", got, want)
	}

	// Another process with a one-hour retention drops the partition of
	// three days ago, whole, when it first makes sure of its partitions.
	other := reopen(t, s)
	if err := other.PutUsage(ctx, []store.UsageRow{minute(time.Now().UTC().Truncate(time.Minute))}, store.UsageRetention{Minute: time.Hour}); err != nil {
		t.Fatal(err)
	}
	got := partitions(t, s, "usage_minute")
	if slices.Contains(got, day(old)) {
		t.Errorf("partitions = %v: %s, past the retention, is still there", got, day(old))
	}
	if !slices.Contains(got, day(today)) {
		t.Errorf("partitions = %v: today's is gone", got)
	}
	// The first process's cache still holds the dropped partition: its
	// next put there finds it missing and creates it again.
	if err := s.PutUsage(ctx, []store.UsageRow{minute(old)}, long); err != nil {
		t.Fatalf("a put into a partition another process dropped: %v", err)
	}
	rows, err := s.ListUsage(ctx, store.UsageQuery{Dimension: "openai#rpm", Period: time.Minute, From: old, To: old.Add(time.Minute)})
	if err != nil || len(rows) != 1 {
		t.Errorf("ListUsage after the put again = %v, %v; want the row", rows, err)
	}
}

// TestUsagePartitionRace has several processes, each with a pool of its
// own, put rows needing the same new partitions at once: every put
// succeeds and every row is kept.
func TestUsagePartitionRace(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	const procs = 8
	handles := make([]*Store, procs)
	for i := range handles {
		h, err := New(pgtest.Pool(t, nil), WithSchema(s.schema), WithTimeout(testTimeout))
		if err != nil {
			t.Fatal(err)
		}
		handles[i] = h
	}
	start := time.Now().UTC().Truncate(time.Hour).Add(-30 * time.Hour)
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for i, h := range handles {
		wg.Go(func() {
			var rows []store.UsageRow
			for k := range 48 {
				rows = append(rows, store.UsageRow{Dimension: "openai#rpm", Period: time.Minute, Start: start.Add(time.Duration(k) * 30 * time.Minute),
					Writer: fmt.Sprintf("w%d", i), Counters: map[string]int64{"grants": 1}, Updated: start})
			}
			errs <- h.PutUsage(ctx, rows, store.UsageRetention{})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	rows, err := s.ListUsage(ctx, store.UsageQuery{Dimension: "openai#rpm", Period: time.Minute, From: start, To: start.Add(48 * time.Hour)})
	if err != nil || len(rows) != procs*48 {
		t.Errorf("ListUsage = %d rows, %v; want %d", len(rows), err, procs*48)
	}
}

// TestUsageExpiredRowHidden checks that a row past its own expiry, in a
// partition kept for newer rows, is not listed.
func TestUsageExpiredRowHidden(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	start := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	rows := []store.UsageRow{
		{Dimension: "openai#rpm", Caller: "alice", Period: time.Minute, Start: start, Writer: "w1", Counters: map[string]int64{"grants": 1}, Updated: start},
		{Dimension: "openai#rpm", Caller: "bob", Period: time.Minute, Start: start, Writer: "w1", Counters: map[string]int64{"grants": 2}, Updated: start},
	}
	if err := s.PutUsage(ctx, rows, store.UsageRetention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE `+pgx.Identifier{s.schema}.Sanitize()+`.usage_minute SET expires = now() - interval '1 second' WHERE caller = 'bob'`); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListUsage(ctx, store.UsageQuery{Dimension: "openai#rpm", Period: time.Minute, From: start, To: start.Add(time.Minute)})
	if err != nil || len(got) != 1 || got[0].Caller != "alice" {
		t.Errorf("ListUsage = %+v, %v; want alice's row alone", got, err)
	}
}
