package pgstore

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
)

// counter is a pgx tracer that counts queries and prepares, and a dialer
// whose connections count the writes (client-to-server flushes) they make.
type counter struct {
	queries, prepares, writes atomic.Int64
}

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.queries.Add(1)
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *counter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	c.prepares.Add(1)
	return ctx
}

func (c *counter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

type countingConn struct {
	net.Conn
	c *counter
}

func (cc countingConn) Write(p []byte) (int, error) {
	cc.c.writes.Add(1)
	return cc.Conn.Write(p)
}

// TestOneRoundTripPerAcquire counts, with a pgx tracer and a counting
// dialer, that every acquisition (one or several dimensions, granted or
// denied, recorded or not) is exactly one query and one write to the server
// once the statement is cached.
// countedStore returns a caller-clock store over a one-connection pool
// whose queries, prepares and socket writes cnt counts.
func countedStore(t *testing.T, cnt *counter) *Store {
	t.Helper()
	pool := pgtest.Pool(t, func(cfg *pgxpool.Config) {
		cfg.MaxConns = 1
		cfg.ConnConfig.Tracer = cnt
		d := &net.Dialer{}
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{c, cnt}, nil
		}
	})
	return newStoreOn(t, pool, WithCallerClock())
}

func TestOneRoundTripPerAcquire(t *testing.T) {
	var cnt counter
	s := countedStore(t, &cnt)
	ctx := context.Background()
	put(t, s, store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 1000, time.Minute)})
	put(t, s, store.Bucket{Name: "openai#tpm", Config: bucket.PerPeriod(bucket.Tokens, 100000, time.Minute)})
	put(t, s, store.Bucket{Name: "openai#concurrent", Config: bucket.ConcurrentSlots(2)})
	var res store.AcquireResult
	acquire := func(items ...store.Item) {
		t.Helper()
		req := &store.AcquireRequest{Now: t0, Items: items, ID: store.NewLeaseID(), TTL: time.Minute}
		if err := s.Acquire(ctx, req, &res); err != nil {
			t.Fatal(err)
		}
	}
	acquire(store.Item{Dimension: "openai#rpm"}) // warm up: prepares and caches the statement
	cases := [][]store.Item{
		{{Dimension: "openai#rpm"}},
		{{Dimension: "openai#rpm"}, {Dimension: "openai#tpm", Cost: 500}},
		{{Dimension: "openai#rpm"}, {Dimension: "openai#tpm", Cost: 500}, {Dimension: "openai#concurrent"}},
		{{Dimension: "openai#concurrent", Cost: 2}}, // denied: one slot is held
	}
	for i, items := range cases {
		q0, p0, w0 := cnt.queries.Load(), cnt.prepares.Load(), cnt.writes.Load()
		acquire(items...)
		q, p, w := cnt.queries.Load()-q0, cnt.prepares.Load()-p0, cnt.writes.Load()-w0
		if q != 1 || p != 0 || w != 1 {
			t.Errorf("case %d (%d items, granted %v): %d queries, %d prepares, %d writes; want 1, 0, 1", i, len(items), res.Granted, q, p, w)
		}
	}
	if res.Granted {
		t.Errorf("the last case should have been denied")
	}
}

// TestOneRoundTripPerCooldownAndSync: a cooldown and a sync are each one
// query, with no prepare, written to the server once (after a first call
// that prepares the statement).
func TestOneRoundTripPerCooldownAndSync(t *testing.T) {
	var cnt counter
	s := countedStore(t, &cnt)
	ctx := context.Background()
	put(t, s, store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 1000, time.Minute)})
	ops := []struct {
		name string
		call func() error
	}{
		{"cooldown", func() error {
			_, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: "openai#rpm", Until: t0.Add(time.Second)})
			return err
		}},
		{"sync", func() error {
			_, err := s.Sync(ctx, store.SyncRequest{Now: t0, Dimension: "openai#rpm", Remaining: 10})
			return err
		}},
	}
	for _, op := range ops {
		for i := range 2 { // the first call prepares the statement
			q0, p0, w0 := cnt.queries.Load(), cnt.prepares.Load(), cnt.writes.Load()
			if err := op.call(); err != nil {
				t.Fatal(err)
			}
			q, p, w := cnt.queries.Load()-q0, cnt.prepares.Load()-p0, cnt.writes.Load()-w0
			if i == 1 && (q != 1 || p != 0 || w != 1) {
				t.Errorf("%s: %d queries, %d prepares, %d writes; want 1, 0, 1", op.name, q, p, w)
			}
		}
	}
}

// TestServerClock checks that by default decisions use the server's clock
// and ignore (without validating) the request's Now.
func TestServerClock(t *testing.T) {
	s := newStoreOn(t, pgtest.Pool(t, nil)) // no WithCallerClock
	ctx := context.Background()
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: time.Time{}, Bucket: store.Bucket{Name: "a#rpm", Config: bucket.PerPeriod(bucket.Requests, 5, time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UnixMilli()
	var res store.AcquireResult
	req := &store.AcquireRequest{Now: time.Unix(-1, 0), Items: []store.Item{{Dimension: "a#rpm"}}, ID: store.NewLeaseID(), TTL: time.Second}
	if err := s.Acquire(ctx, req, &res); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()
	if !res.Granted {
		t.Fatalf("denied: %+v", res)
	}
	if at := res.ExpiresAt.UnixMilli() - 1000; at < before || at > after {
		t.Errorf("decision time %d is outside the call [%d, %d]: not the server's clock", at, before, after)
	}
	st, err := s.Peek(ctx, store.PeekRequest{Now: time.Time{}, Dimensions: []string{"a#rpm"}})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Now.UnixMilli() < after || st[0].Tokens >= 5000 {
		t.Errorf("peek at %d (after %d) saw %d millitokens, want < 5000 (one taken)", st[0].Now.UnixMilli(), after, st[0].Tokens)
	}
}

// TestMigrateConcurrently runs Migrate from several pools at once on one
// new schema: the advisory lock serialises them and all succeed.
func TestMigrateConcurrently(t *testing.T) {
	schema := pgtest.Schema()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
		s, err := New(pool, WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { errs[i] = s.Migrate(context.Background()) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
	s, _ := New(pgtest.Pool(t, nil), WithSchema(schema))
	if v, err := s.Version(context.Background()); err != nil || v != SchemaVersion() {
		t.Errorf("Version = %d, %v; want %d", v, err, SchemaVersion())
	}
}
