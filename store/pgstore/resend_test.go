package pgstore

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/faultproxy"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
)

// TestLostReplyAppliedOnce drops the server's reply to a settlement and to
// a penalty after the server ran them, closing the connection: pgx never
// sends a statement again once it wrote it, and the client retries only
// contention, which rolled everything back, so the change is applied once
// and the caller sees ErrUnavailable (the outcome is unknown to it).
func TestLostReplyAppliedOnce(t *testing.T) {
	pgtest.SkipShort(t)
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(u.Host, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	u.Host = p.Addr()
	// One round trip per statement, its text in it, so that the proxy
	// recognises the statement and the reply it drops is the result's.
	pool := pgtest.PoolAt(t, u.String(), func(c *pgxpool.Config) {
		c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	})
	s := newStoreOn(t, pool)
	cfg := sluice.DefaultConfig()
	cfg.MaxRetries = 3
	c, err := sluice.New(s, sluice.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: store.Bucket{Name: "v#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, 24*time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	balance := func() int64 {
		t.Helper()
		st, err := c.Peek(ctx, "v#tpm")
		if err != nil {
			t.Fatal(err)
		}
		return int64(st[0].Tokens) / 1000 // refill in a test's time is below a token
	}
	lose := func(fn string) func() int {
		h, n := faultproxy.DropReplyAfter([]byte("."+fn+"("), 1)
		p.SetHook(h)
		return n
	}

	r, err := c.Acquire(ctx, "v#tpm", sluice.WithCost(500))
	if err != nil || r.Outcome != sluice.Granted {
		t.Fatalf("acquire: %+v, %v", r, err)
	}
	lost := lose("adjust")
	_, err = r.Lease.Settle(ctx, "v#tpm", 300)
	if lost() != 1 {
		t.Fatal("no reply was lost: the test did not exercise a lost reply")
	}
	if !errors.Is(err, sluice.ErrUnavailable) {
		t.Errorf("Settle with its reply lost = %v, want an error matching ErrUnavailable", err)
	}
	if got := balance(); got != 700 {
		t.Errorf("after settling 500 to 300 with the reply lost: %d tokens, want 700 (applied once)", got)
	}

	lost = lose("penalize")
	_, err = c.Penalize(ctx, "v#tpm", 0.5)
	if lost() != 1 {
		t.Fatal("no reply was lost")
	}
	if !errors.Is(err, sluice.ErrUnavailable) {
		t.Errorf("Penalize with its reply lost = %v, want an error matching ErrUnavailable", err)
	}
	if got := balance(); got != 350 {
		t.Errorf("after a ×0.5 penalty with the reply lost: %d tokens, want 350 (applied once)", got)
	}

	lost = lose("acquire")
	_, err = c.Acquire(ctx, "v#tpm", sluice.WithCost(100)) // FailClosed, the default
	if lost() != 1 {
		t.Fatal("no reply was lost")
	}
	if !errors.Is(err, sluice.ErrUnavailable) {
		t.Errorf("Acquire with its reply lost = %v, want an error matching ErrUnavailable", err)
	}
	if got := balance(); got != 250 {
		t.Errorf("after an acquisition of 100 with the reply lost: %d tokens, want 250 (applied once)", got)
	}
}
