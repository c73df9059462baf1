package dynamostore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// TestOneProcessHotRow makes 16 recorded reservations of one bucket at
// once from one store, then settles each above its estimate at once: with
// no other writer, none of the writes may lose a version race (16
// reservations and 16 settlements are 32 transactions), and the balance
// is exact. Concurrent calls of one process used to race each other for
// the row, each loss costing a transaction, and a settlement a read of the
// row and a backoff.
func TestOneProcessHotRow(t *testing.T) {
	const n, cost, over = 16, 10, 3
	tp := newTap()
	db := tp.client()
	s := openStore(t, db, newTable(t, db))
	put(t, s, t0, store.Bucket{Name: "v#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Hour)})
	tp.reset()
	ctx := context.Background()
	ids := make([]store.LeaseID, n)
	run := func(f func(i int) error) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f(i); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	run(func(i int) error {
		ids[i] = store.NewLeaseID()
		var res store.ReserveResult
		req := &store.ReserveRequest{Now: t0, Items: []store.Item{{Dimension: "v#tpm", Cost: cost}}, ID: ids[i],
			TTL: time.Minute, MaxWait: time.Minute, Record: true, Op: store.NewLeaseID()}
		return s.Reserve(ctx, req, &res)
	})
	run(func(i int) error {
		_, err := s.Adjust(ctx, store.AdjustRequest{Now: t0, ID: ids[i], Dimension: "v#tpm", Delta: over, Held: cost, Recorded: true})
		return err
	})
	ops, _, _ := tp.snapshot()
	if got, want := ops["TransactWriteItems"], 2*n; got != want {
		t.Errorf("%d TransactWriteItems, want %d (no lost race): %v", got, want, ops)
	}
	st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"v#tpm"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st[0].Tokens, int64(1000-n*(cost+over))*bucket.Milli; got != want {
		t.Errorf("balance %d millitokens, want %d", got, want)
	}
}
