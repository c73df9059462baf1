package storeurl

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/internal/redistest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

func TestOpenErrors(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"", "empty store URL"},
		{"localhost:6379", `scheme "localhost" is not supported`},
		{"%zz", "not a store URL"},
		{"ftp://x", `scheme "ftp" is not supported`},
		{"memory://host", "memory:// takes no host"},
		{"memory://?x=1", "memory:// takes no host"},
		{"redis://user:hunter2@127.0.0.1:6379", "the URL contains a password"},
		{"redis://:hunter2@127.0.0.1:6379", "SLUICE_REDIS_PASSWORD"},
		{"rediss+cluster://u:hunter2@a:1,b:2", "the URL contains a password"},
		{"postgres://u:hunter2@db/x", "PGPASSWORD"},
		{"postgres://u@127.0.0.1:1/x?password=hunter2", "the URL contains a password (password=)"},
		{"postgresql://127.0.0.1:1/x?sslmode=disable&password=hunter2", "PGPASSWORD"},
		{"postgres://127.0.0.1:1/x?PassWord=hunter2", "the URL contains a password"},
		{"postgres://127.0.0.1:1/x?p%61ssword=hunter2", "the URL contains a password"},
		{"postgres://127.0.0.1:1/x?sslpassword=hunter2", "the URL contains a password (sslpassword=)"},
		{"postgres://u:hunter2@127.0.0.1:1/x?password=hunter2", "the URL contains a password"},
		{"redis://127.0.0.1:6379?password=hunter2", "SLUICE_REDIS_PASSWORD"},
		{"dynamodb://t1?region=eu-west-1&password=hunter2", "the URL contains a password"},
		{"redis://127.0.0.1:6379/0?password=hunter2%zz", "the URL contains a password (password=)"},
		{"redis://127.0.0.1:6379/0?timeout=2s;password=hunter2", "the URL contains a password (password=)"},
		{"postgres://127.0.0.1:1/x?sslmode=disable;password=hunter2", "PGPASSWORD"},
		{"postgres://127.0.0.1:1/x?x=%zz&SSLPassword=hunter2", "the URL contains a password (SSLPassword=)"},
		{"postgres://127.0.0.1:1/x?p%61ssword=hunter2%", "the URL contains a password (password=)"},
		{"dynamodb://t1?region=eu-west-1;password=hunter2&x", "the URL contains a password"},
		{"host=127.0.0.1 password=hunter2", "not a store URL"},
		{"host=127.0.0.1 sslpassword='hunter2'", "not a store URL"},
		{"redis://", "name the server"},
		{"redis://127.0.0.1:6379/x", "invalid database number"},
		{"redis://127.0.0.1:6379?timeout=soon", `timeout="soon"`},
		{"redis://127.0.0.1:6379?caller_clock=maybe", `caller_clock="maybe"`},
		{"redis://127.0.0.1:6379?bogus=1", "bogus"},
		{"redis://127.0.0.1:6379?prefix=a{b", "must not contain braces"},
		{"redis+cluster://a:1,,b:2", "empty host"},
		{"redis+cluster://a:1,b:2/3", "only database 0"},
		{"postgres://127.0.0.1:1/db?migrate=perhaps", `migrate="perhaps"`},
		{"postgres://127.0.0.1:1/db?timeout=x", `timeout="x"`},
		{"dynamodb://?region=eu-west-1", "name the table"},
		{"dynamodb://t1?bogus=1", "unknown option"},
		{"dynamodb://t1?region=eu-west-1&read_then_transact=maybe", `read_then_transact="maybe"`},
		{"dynamodb://t1?region=eu-west-1&seeds_path=maybe", `seeds_path="maybe"`},
		{"dynamodb://user@t1", "takes no user"},
	} {
		_, err := OpenDetailed(context.Background(), c.url, Options{})
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want ErrBadURL with %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the error leaks the password: %v", c.url, err)
		}
	}
}

func TestOpenKinds(t *testing.T) {
	for _, c := range []struct {
		url, kind string
		shared    bool
	}{
		{"memory://", "memory", true},
		{"redis://127.0.0.1:1/2?dial_timeout=1s&prefix=x:", "redis", true},
		{"rediss://user@127.0.0.1:1", "redis", true},
		{"redis://127.0.0.1:1?caller_clock=true", "redis", false},
		{"redis+cluster://127.0.0.1:1,127.0.0.1:2?hash_tag=sluice", "redis-cluster", true},
		{"rediss+cluster://127.0.0.1:1", "redis-cluster", true},
		{"postgres://sluice@127.0.0.1:1/db?migrate=false&schema=s1&sslmode=disable", "postgres", true},
		{"postgresql://127.0.0.1:1/db?migrate=false&caller_clock=true", "postgres", false},
		{"dynamodb://sluice-table?region=eu-west-1&endpoint=http://127.0.0.1:1", "dynamodb", false},
	} {
		op, err := OpenDetailed(context.Background(), c.url, Options{})
		if err != nil {
			t.Errorf("%q: %v", c.url, err)
			continue
		}
		if op.Kind != c.kind || op.SharedClock != c.shared || op.Store == nil {
			t.Errorf("%q: kind %q shared %v", c.url, op.Kind, op.SharedClock)
		}
		if err := op.Close(); err != nil {
			t.Errorf("%q: close: %v", c.url, err)
		}
	}
}

func TestMemoryShared(t *testing.T) {
	mem := memstore.New()
	op, err := OpenDetailed(context.Background(), "memory://", Options{Memory: mem})
	if err != nil || contract.Unwrap(op.Store) != mem {
		t.Fatalf("%v", err)
	}
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.ListBuckets(context.Background(), store.ListBucketsRequest{Now: time.Now()}); err != nil {
		t.Errorf("Close closed the injected store: %v", err)
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
	for name, o := range map[string]Options{"env": {LookupEnv: env}, "file": {PasswordFile: file}, "none": {}} {
		op, err := OpenDetailed(context.Background(), url, o)
		if err != nil {
			t.Fatal(err)
		}
		err = op.Store.PutBucket(context.Background(), store.PutBucketRequest{Now: time.Now(), Bucket: b})
		if (err == nil) != (name != "none") {
			t.Errorf("%s: %v", name, err)
		}
		op.Close()
	}
	if _, err := OpenDetailed(context.Background(), url, Options{PasswordFile: file + ".missing"}); !errors.Is(err, ErrBadURL) {
		t.Errorf("missing password file: %v", err)
	}
}

// TestRedactedURL: the URL a store prints (bench, demo, errors) never
// shows a password, whatever part of the URL carried it.
func TestRedactedURL(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"memory://", "memory://"},
		{"redis://u@127.0.0.1:1/2?dial_timeout=1s", "redis://u@127.0.0.1:1/2?dial_timeout=1s"},
		{"postgres://sluice@127.0.0.1:1/db?migrate=false&sslmode=disable&passfile=/run/pg", "postgres://sluice@127.0.0.1:1/db?migrate=false&sslmode=disable&passfile=/run/pg"},
	} {
		op, err := OpenDetailed(context.Background(), c.url, Options{NoMigrate: true})
		if err != nil {
			t.Fatalf("%q: %v", c.url, err)
		}
		if op.Redacted != c.want {
			t.Errorf("%q: Redacted = %q, want %q", c.url, op.Redacted, c.want)
		}
		op.Close()
	}
	for _, c := range []struct{ url, want string }{
		{"postgres://u:hunter2@db/x?sslmode=disable&password=hunter2", "postgres://u:xxxxx@db/x?sslmode=disable&password=xxxxx"},
		{"postgres://db/x?SSLPassword=hunter2", "postgres://db/x?SSLPassword=xxxxx"},
		{"redis://h/0?password=hunter2%zz", "redis://h/0?password=xxxxx"},
		{"redis://h/0?timeout=2s;password=hunter2&x=%zz", "redis://h/0?timeout=2s;password=xxxxx&x=%zz"},
		{"postgres://db/x?pass%77ord=hunter2;sslmode=disable", "postgres://db/x?pass%77ord=xxxxx;sslmode=disable"},
	} {
		if got := redact(mustParse(t, c.url)); got != c.want {
			t.Errorf("redact(%q) = %q, want %q", c.url, got, c.want)
		}
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestOpenAdminHandles: a postgres:// store exposes its *pgstore.Store, a
// dynamodb:// store its client and table, which Options.Table overrides.
func TestOpenAdminHandles(t *testing.T) {
	ctx := context.Background()
	op, err := OpenDetailed(ctx, "postgres://127.0.0.1:1/db?schema=s1&sslmode=disable", Options{NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if op.Postgres == nil || op.Postgres.Schema() != "s1" || op.DynamoDB != nil {
		t.Errorf("postgres: %+v", op)
	}
	op.Close()
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"SLUICE_TABLE_NAME": "from-env", "SLUICE_AWS_REGION": "eu-west-1"}[k]
		return v, ok
	}
	for _, c := range []struct{ url, table, want string }{
		{"dynamodb://from-url?region=eu-west-1", "", "from-url"},
		{"dynamodb://from-url?region=eu-west-1", "from-arg", "from-arg"},
		{"dynamodb://", "", "from-env"},
		{"dynamodb://", "from-arg", "from-arg"},
	} {
		op, err := OpenDetailed(ctx, c.url, Options{LookupEnv: env, Table: c.table})
		if err != nil {
			t.Fatalf("%q: %v", c.url, err)
		}
		if op.DynamoDB == nil || op.Table != c.want || op.Postgres != nil || op.DynamoDB.Options().Region != "eu-west-1" {
			t.Errorf("%q table %q: got table %q", c.url, c.table, op.Table)
		}
		op.Close()
	}
}

// TestOpenDynamoNoRegion: without a region anywhere, the URL is refused up
// front instead of every request failing.
func TestOpenDynamoNoRegion(t *testing.T) {
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	_, err := OpenDetailed(context.Background(), "dynamodb://tbl1", Options{})
	if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), "no AWS region") {
		t.Errorf("got %v", err)
	}
}
