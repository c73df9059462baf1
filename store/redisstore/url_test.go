package redisstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/redisstore"
	"github.com/ontopix/sluice/store/storeurl"
)

// openers opens the Redis URLs only.
func openers() storeurl.Openers { return storeurl.Openers{redisstore.URLOpener()} }

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
			st, err := openers().Open(ctx, "redis://"+srv.Addr+"/0"+tc.query, storeurl.WithLookupEnv(noEnv))
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
	if _, err := openers().Open(ctx, "redis://"+srv.Addr+"/0?prefix=x:&bogus=1", storeurl.WithLookupEnv(noEnv)); !errors.Is(err, storeurl.ErrBadURL) {
		t.Errorf("unknown option: %v, want storeurl.ErrBadURL", err)
	}
}

// TestRedisPassword opens a password-protected server with the password
// from the environment and from a file, and fails without it.
func TestRedisPassword(t *testing.T) {
	srv := redistest.New(t)
	if _, err := srv.Do("CONFIG", "SET", "requirepass", "s3cret"); err != nil {
		t.Fatal(err)
	}
	url := "redis://" + srv.Addr + "/0?timeout=2s&max_retries=0"
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		return map[string]string{"SLUICE_REDIS_PASSWORD": "s3cret"}[k], k == "SLUICE_REDIS_PASSWORD"
	}
	b := store.Bucket{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 5, time.Minute)}
	for name, o := range map[string]storeurl.Options{"env": {LookupEnv: env}, "file": {PasswordFile: file}, "none": {}} {
		op, err := openers().OpenDetailed(context.Background(), url, o)
		if err != nil {
			t.Fatal(err)
		}
		err = op.Store.PutBucket(context.Background(), store.PutBucketRequest{Now: time.Now(), Bucket: b})
		if (err == nil) != (name != "none") {
			t.Errorf("%s: %v", name, err)
		}
		op.Close()
	}
	if _, err := openers().OpenDetailed(context.Background(), url, storeurl.Options{PasswordFile: file + ".missing"}); !errors.Is(err, storeurl.ErrBadURL) {
		t.Errorf("missing password file: %v", err)
	}
}
