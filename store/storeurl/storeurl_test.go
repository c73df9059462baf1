package storeurl_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/allstores"
	"github.com/ontopix/sluice/store/redisstore"
	"github.com/ontopix/sluice/store/storeurl"
)

// noEnv is an environment with nothing set.
func noEnv(string) (string, bool) { return "", false }

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
		_, err := allstores.OpenDetailed(context.Background(), c.url, storeurl.Options{})
		if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want storeurl.ErrBadURL with %q", c.url, err, c.want)
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
		op, err := allstores.OpenDetailed(context.Background(), c.url, storeurl.Options{})
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

// TestOpenStore: a network store's Close also closes its client, and Open
// applies the With options.
func TestOpenStore(t *testing.T) {
	ctx := context.Background()
	st, err := allstores.Open(ctx, "redis://127.0.0.1:1/0?timeout=1s&max_retries=0", storeurl.WithLookupEnv(noEnv))
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
		opts []storeurl.Option
		want string
	}{
		{"environment", []storeurl.Option{storeurl.WithLookupEnv(env)}, "from-env"},
		{"storeurl.WithTable", []storeurl.Option{storeurl.WithLookupEnv(env), storeurl.WithTable("from-option")}, "from-option"},
		{"storeurl.Options value", []storeurl.Option{storeurl.Options{LookupEnv: env, Table: "from-struct"}}, "from-struct"},
	} {
		op, err := allstores.OpenDetailed(ctx, "dynamodb://", tc.opts...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if op.Table != tc.want {
			t.Errorf("%s: table %q, want %q", tc.name, op.Table, tc.want)
		}
		op.Close()
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
		op, err := allstores.OpenDetailed(context.Background(), c.url, storeurl.Options{NoMigrate: true})
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
		if got := storeurl.Redact(mustParse(t, c.url)); got != c.want {
			t.Errorf("storeurl.Redact(%q) = %q, want %q", c.url, got, c.want)
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

// TestOpenersSchemes: Openers open only their stores' schemes, and say
// which those are; the password guard comes first, whatever the scheme.
func TestOpenersSchemes(t *testing.T) {
	ctx := context.Background()
	redisOnly := storeurl.Openers{redisstore.URLOpener()}
	for _, c := range []struct{ url, want string }{
		{"postgres://127.0.0.1:1/db", `scheme "postgres" is not supported (supported: redis, rediss, redis+cluster, rediss+cluster)`},
		{"memory://", `scheme "memory" is not supported`},
		{"postgres://u:hunter2@127.0.0.1:1/db", "the URL contains a password; pass it in PGPASSWORD"},
	} {
		_, err := redisOnly.Open(ctx, c.url, storeurl.WithLookupEnv(noEnv))
		if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want ErrBadURL with %q", c.url, err, c.want)
		}
	}
	if _, err := (storeurl.Openers{}).Open(ctx, "memory://"); !errors.Is(err, storeurl.ErrBadURL) {
		t.Errorf("no openers: %v", err)
	}
	// A store's OpenURL, called directly, refuses a password too.
	u, _ := url.Parse("redis://:hunter2@127.0.0.1:1/0")
	if _, err := redisstore.OpenURL(ctx, u, storeurl.Options{}); !errors.Is(err, storeurl.ErrBadURL) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("OpenURL with a password: %v", err)
	}
}

// TestOpenKeepsCapabilities opens stores by URL: what Open wraps around
// them (the checks, closing the client) must not hide what the store
// behind can do, which the Client looks for behind the wrappers: freed-slot
// notices wake waiters in line, and a store deciding at the caller's clock
// (DynamoDB) makes a reservation valid at the call's stamp plus its wait.
func TestOpenKeepsCapabilities(t *testing.T) {
	ctx := context.Background()
	st, err := allstores.Open(ctx, "redis://127.0.0.1:1/0?max_retries=0", storeurl.WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if raw, ok := contract.Unwrap(st).(store.FreedWatcher); !ok {
		t.Errorf("redis: %T behind the wrappers has no freed-slot notices", raw)
	}
	dd, err := allstores.Open(ctx, "dynamodb://sluice?endpoint=http://127.0.0.1:1&region=us-east-1", storeurl.WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	if cc, ok := contract.Unwrap(dd).(store.CallerClock); !ok || !cc.CallerClock() {
		t.Errorf("dynamodb: %T behind the wrappers does not report deciding at the caller's clock", contract.Unwrap(dd))
	}
}

// TestUnparsableURLHidesItsUserinfo: a URL that does not parse is printed
// with everything up to its last '@' hidden, as a URL parser splits the
// userinfo there: a password holding an '@' shows no part of itself.
func TestUnparsableURLHidesItsUserinfo(t *testing.T) {
	const secret = "tPassw0rd"
	for _, raw := range []string{
		"redis://u:s3cr@" + secret + "@127.0.0.1:port/0",   // a typo in the port
		"redis://u:s3cr@" + secret + "@127.0.0.1:6379/%zz", // a bad escape
		"redis://u:s3cr@" + secret + "@[::1/0",             // an unclosed IPv6 bracket
		"u:s3cr@" + secret + "@127.0.0.1:%zz",              // no scheme
	} {
		_, err := storeurl.Openers{redisstore.URLOpener()}.Open(context.Background(), raw,
			storeurl.WithLookupEnv(func(string) (string, bool) { return "", false }))
		if !errors.Is(err, storeurl.ErrBadURL) {
			t.Fatalf("%q: err = %v, want one matching ErrBadURL", raw, err)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "s3cr") {
			t.Errorf("%q: the error shows part of the password: %v", raw, err)
		}
	}
}
