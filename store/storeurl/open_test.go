package storeurl

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/redistest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// noEnv is an environment with nothing set.
func noEnv(string) (string, bool) { return "", false }

// TestRedisPrefix: the prefix option is Sluice's, taken out before the rest
// of the query goes to go-redis (which rejects options it does not know),
// and every key of the store carries it, on a real redis-server.
func TestRedisPrefix(t *testing.T) {
	srv := redistest.New(t)
	ctx := context.Background()
	b := store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)}
	for _, tc := range []struct {
		query, key string
	}{
		{"?prefix=svc1:", "svc1:{openai}#rpm"},
		{"?dial_timeout=1s&prefix=svc2:&timeout=2s", "svc2:{openai}#rpm"},
		{"?prefix=", "{openai}#rpm"},
		{"", "sluice:{openai}#rpm"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			st, err := Open(ctx, "redis://"+srv.Addr+"/0"+tc.query, WithLookupEnv(noEnv))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer st.Close()
			if err := st.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: b}); err != nil {
				t.Fatal(err)
			}
			if got, err := srv.Do("EXISTS", tc.key); err != nil || got != "1" {
				t.Errorf("EXISTS %s = %q, %v; want 1", tc.key, got, err)
			}
			if _, err := srv.Do("DEL", tc.key); err != nil {
				t.Fatal(err)
			}
		})
	}
	// go-redis's own options still reach go-redis, and its errors are
	// bad-URL errors.
	if _, err := Open(ctx, "redis://"+srv.Addr+"/0?prefix=x:&bogus=1", WithLookupEnv(noEnv)); !errors.Is(err, ErrBadURL) {
		t.Errorf("unknown option: %v, want ErrBadURL", err)
	}
}

// TestOpenStore: Open returns the memory store itself (so that the client
// sees what it implements), a network store whose Close also closes its
// client, and applies the With options.
func TestOpenStore(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, "memory://")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*memstore.Store); !ok {
		t.Errorf("memory:// opened a %T, want *memstore.Store", st)
	}
	st.Close()

	mem := memstore.New()
	defer mem.Close()
	st, err = Open(ctx, "memory://", WithMemory(mem))
	if err != nil {
		t.Fatalf("WithMemory: %v", err)
	}
	if err := st.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: store.Bucket{Name: "m", Config: bucket.ConcurrentSlots(1)}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if got, err := mem.ListBuckets(ctx, store.ListBucketsRequest{Now: time.Now()}); err != nil || len(got) != 1 {
		t.Errorf("the given memory store after Close: %v, %v; want it open, holding the bucket", got, err)
	}

	st, err = Open(ctx, "redis://127.0.0.1:1/0?timeout=1s&max_retries=0", WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := st.ListBuckets(ctx, store.ListBucketsRequest{Now: time.Now()}); err == nil {
		t.Error("ListBuckets after Close succeeded; want the closed client's error")
	}

	env := func(k string) (string, bool) {
		v, ok := map[string]string{"SLUICE_TABLE_NAME": "from-env", "SLUICE_AWS_REGION": "eu-west-1"}[k]
		return v, ok
	}
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"environment", []Option{WithLookupEnv(env)}, "from-env"},
		{"WithTable", []Option{WithLookupEnv(env), WithTable("from-option")}, "from-option"},
		{"Options value", []Option{Options{LookupEnv: env, Table: "from-struct"}}, "from-struct"},
	} {
		op, err := OpenDetailed(ctx, "dynamodb://", tc.opts...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if op.Table != tc.want {
			t.Errorf("%s: table %q, want %q", tc.name, op.Table, tc.want)
		}
		op.Close()
	}
}

// TestWithoutMigrate: migrate=true (the default) would run the migration
// at once, so against a dead server Open fails as unavailable, not as a bad
// URL; WithoutMigrate opens without touching the server.
func TestWithoutMigrate(t *testing.T) {
	ctx := context.Background()
	url := "postgres://sluice@127.0.0.1:1/db?sslmode=disable&timeout=1s&connect_timeout=1"
	if _, err := Open(ctx, url, WithLookupEnv(noEnv)); err == nil || errors.Is(err, ErrBadURL) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open with migrate on a dead server: %v; want store.ErrUnavailable", err)
	}
	st, err := Open(ctx, url, WithLookupEnv(noEnv), WithoutMigrate())
	if err != nil {
		t.Fatalf("Open WithoutMigrate: %v", err)
	}
	st.Close()
}
