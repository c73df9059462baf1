package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// Usage-history benchmark sizes: the callers of one dimension and the
// writers (processes) of a fleet.
const (
	benchCallers = 5
	benchWriters = 2
)

// runUsageBenchmarks runs the usage-history benchmarks when the store
// implements store.Usager: UsagePut, one writer's flush (a minute row and
// an hour row for each of benchCallers callers), and UsageListDay, the
// read of a day of minute rows of benchCallers callers and benchWriters
// writers (1440 × 10 rows).
func runUsageBenchmarks(b *testing.B, h Harness) {
	usager := func(b *testing.B) store.Usager {
		s := contract.Unwrap(h.NewStore(b))
		u, ok := s.(store.Usager)
		if !ok {
			b.Skip("the store does not implement store.Usager")
		}
		if h.PrepareUsage != nil {
			h.PrepareUsage(b, s)
		}
		return u
	}
	now := time.Now().UTC()
	minute, hour := now.Truncate(time.Minute), now.Truncate(time.Hour)
	b.Run("UsagePut", func(b *testing.B) {
		u := usager(b)
		ctx := context.Background()
		rows := make([]store.UsageRow, 0, 2*benchCallers)
		for c := range benchCallers {
			for _, p := range []struct {
				d time.Duration
				t time.Time
			}{{time.Minute, minute}, {time.Hour, hour}} {
				rows = append(rows, store.UsageRow{Dimension: "bench#rpm", Caller: fmt.Sprintf("caller-%d", c), Period: p.d, Start: p.t,
					Writer: "bench-writer", Counters: map[string]int64{"grants": 0, "refusals": 0, "waits": 0, "reserved": 0}})
			}
		}
		var n int64
		b.ReportAllocs()
		for b.Loop() {
			n++
			for i := range rows {
				rows[i].Counters["grants"] = n
				rows[i].Updated = time.Now()
			}
			if err := u.PutUsage(ctx, rows, store.UsageRetention{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("UsageListDay", func(b *testing.B) {
		u := usager(b)
		ctx := context.Background()
		from := minute.Add(-24 * time.Hour)
		for w := range benchWriters {
			var rows []store.UsageRow
			for k := range 24 * 60 {
				for c := range benchCallers {
					rows = append(rows, store.UsageRow{Dimension: "bench#rpm", Caller: fmt.Sprintf("caller-%d", c), Period: time.Minute,
						Start: from.Add(time.Duration(k) * time.Minute), Writer: fmt.Sprintf("writer-%d", w),
						Counters: map[string]int64{"grants": int64(k), "refusals": 1, "waits": 2, "reserved": 300}, Updated: now})
				}
			}
			if err := u.PutUsage(ctx, rows, store.UsageRetention{}); err != nil {
				b.Fatal(err)
			}
		}
		q := store.UsageQuery{Dimension: "bench#rpm", Period: time.Minute, From: from, To: minute}
		b.ReportAllocs()
		for b.Loop() {
			rows, err := u.ListUsage(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			if len(rows) != 24*60*benchCallers*benchWriters {
				b.Fatalf("listed %d rows, want %d", len(rows), 24*60*benchCallers*benchWriters)
			}
		}
	})
}
