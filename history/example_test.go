package history_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/store/memstore"
)

// A Recorder wired to a Client: its flush loop writes the totals to the
// store, and Query reads them back, summed over every process that writes
// to it.
func Example() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()

	rec, err := history.New(st)
	if err != nil {
		panic(err)
	}
	client, err := sluice.New(st, sluice.WithObserver(rec.Observer()))
	if err != nil {
		panic(err)
	}
	_ = client.PutBucket(ctx, sluice.Bucket{Name: "openai#tpm", Config: sluice.PerMinute(sluice.Tokens, 30_000)})

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rec.Run(runCtx) }()

	for _, used := range []int64{800, 900, 1200} {
		res, err := client.Acquire(ctx, "openai#tpm", sluice.WithCost(1_000), sluice.WithCaller("web"))
		if err != nil || !res.Granted() {
			panic(err)
		}
		_, _ = res.Lease.Settle(ctx, "openai#tpm", used)
	}
	stop()
	if err := <-done; err != nil { // Run flushes once more as it ends
		panic(err)
	}

	now := time.Now()
	points, err := rec.Query(ctx, history.Query{Dimension: "openai#tpm", From: now.Add(-time.Hour), To: now.Add(time.Minute), Step: time.Minute})
	if err != nil {
		panic(err)
	}
	var grants, reserved, settled, debt int64
	for _, p := range points {
		grants += p.Counts.Grants
		reserved += p.Counts.Reserved
		settled += p.Counts.Settled
		debt += p.Counts.Debt
	}
	fmt.Println("grants:", grants, "reserved:", reserved, "settled:", settled, "debt:", debt)

	byCaller, err := rec.Callers(ctx, "openai#tpm", now.Add(-time.Hour), now.Add(time.Minute))
	if err != nil {
		panic(err)
	}
	fmt.Println("web's grants:", byCaller["web"].Grants)
	fmt.Println("in the last minute:", rec.Live("openai#tpm").Grants)
	// Output:
	// grants: 3 reserved: 3000 settled: 2900 debt: 200
	// web's grants: 3
	// in the last minute: 3
}
