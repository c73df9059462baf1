package pgstore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
)

// TestEmptyPutAcrossUpgrade: on a schema one version behind (without
// version 10's put_bucket_if), a put with Empty still creates the bucket,
// full, as the previous code did; once migrated, the same put creates it
// empty, and version 8's put_bucket_if, which processes still running the
// previous code call, keeps creating full.
func TestEmptyPutAcrossUpgrade(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, nil)
	schema := pgtest.Schema()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	// Every migration before 010_empty, the one that brought empty puts.
	before := slices.IndexFunc(ms, func(m migration) bool { return m.version == 10 })
	if before < 0 {
		t.Fatal("no migration 10")
	}
	createAtVersion(t, pool, schema, before)
	s, err := New(pool, WithSchema(schema), WithCallerClock(), WithTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	rpm := func(name string) store.Bucket {
		return store.Bucket{Name: name, Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)}
	}
	create := func(name string, empty bool) {
		t.Helper()
		if err := s.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: rpm(name), IfAbsent: true, Empty: empty}); err != nil {
			t.Fatalf("PutBucket(%s): %v", name, err)
		}
	}
	create("before", true)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	create("after", true)
	// The previous code's call: version 8's overload, no p_empty.
	b := rpm("previous")
	_, err = pool.Exec(ctx, s.q.putIf, append([]any{b.Name, int16(b.Type), b.Capacity, b.RefillAmount,
		b.RefillPeriod.Milliseconds(), b.CostPerCall, b.MaxDebt, t0.UnixMilli(), false, s.skewMs()},
		putCondition(store.PutBucketRequest{Bucket: b, IfAbsent: true})...)...)
	if err != nil {
		t.Fatalf("version 8's put_bucket_if: %v", err)
	}
	for _, tt := range []struct {
		name   string
		tokens int64
	}{
		{"before", 10_000},
		{"after", 0},
		{"previous", 10_000},
	} {
		st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{tt.name}})
		if err != nil {
			t.Fatal(err)
		}
		if got := st[0].Tokens; got != tt.tokens {
			t.Errorf("%s: %d millitokens, want %d", tt.name, got, tt.tokens)
		}
	}
}
