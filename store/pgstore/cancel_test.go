package pgstore

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/storeurl"
)

// TestTimedOutAcquisitionLeavesNothing holds a bucket's row locked from
// another session while the store acquires from it: the acquisition times
// out and fails. Nothing of it may stay on the server: a statement left
// waiting for the lock would hold a connection and, once the lock is
// released, debit the bucket for a caller that was told its acquisition
// failed. (pgx closes the connection of a call whose context ended, and
// the server ends its backend.)
func TestTimedOutAcquisitionLeavesNothing(t *testing.T) {
	pgtest.SkipShort(t)
	ctx := context.Background()
	schema := pgtest.Schema()
	raw := pgtest.URL()
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	u, err := url.Parse(raw + sep + "schema=" + schema + "&timeout=300ms")
	if err != nil {
		t.Fatal(err)
	}
	op, err := OpenURL(ctx, u, storeurl.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	s := op.Store
	const dim = "lock#rpm"
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: store.Bucket{Name: dim, Config: bucket.PerPeriod(bucket.Requests, 1000, time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{schema, "buckets"}.Sanitize()+" WHERE name = $1 FOR UPDATE", dim); err != nil {
		t.Fatal(err)
	}
	var res store.AcquireResult
	err = s.Acquire(ctx, &store.AcquireRequest{Now: time.Now(), Items: []store.Item{{Dimension: dim, Cost: 10}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("acquire on a locked row: %v, want store.ErrUnavailable (timed out)", err)
	}
	time.Sleep(1500 * time.Millisecond) // well past the cancel's delivery
	var waiting int
	if err := holder.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'", schema).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	if waiting != 0 {
		t.Errorf("%d statements of the failed acquisition still wait for the lock on the server", waiting)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // a statement left waiting runs now
	states, err := s.Peek(ctx, store.PeekRequest{Now: time.Now(), Dimensions: []string{dim}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := states[0].Tokens/bucket.Milli, int64(1000); got < want {
		t.Errorf("after the lock was released the bucket holds %d, want %d: the failed acquisition was applied", got, want)
	}
}
