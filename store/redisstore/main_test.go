package redisstore

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/internal/testing/crashtest"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/internal/testing/testproc"
	"github.com/ontopix/sluice/store"
)

// The servers every test of this binary shares; started once by TestMain.
var (
	standalone *redistest.Server
	cluster    *redistest.Cluster
	prefixes   atomic.Int64
)

func TestMain(m *testing.M) {
	if code, ok := crashtest.Child(crashConfig); ok {
		os.Exit(code)
	}
	if testproc.SkipPackage("redis-server") {
		os.Exit(0)
	}
	var err error
	if standalone, err = redistest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: redis-server is required for these tests:", err)
		os.Exit(1)
	}
	if cluster, err = redistest.StartCluster(3); err != nil {
		standalone.Close()
		fmt.Fprintln(os.Stderr, "FAIL: a 3-master redis cluster is required for these tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	standalone.Close()
	cluster.Close()
	os.Exit(code)
}

// newClient returns a client of the standalone server, closed with t.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: standalone.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// newClusterClient returns a client of the cluster, closed with t.
func newClusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { c.Close() })
	return c
}

// uniquePrefix keeps tests on the shared servers apart.
func uniquePrefix() string { return fmt.Sprintf("t%d:", prefixes.Add(1)) }

// newStore returns a caller-clock store on a fresh prefix of the standalone
// server.
func newStore(t testing.TB, opts ...Option) *Store {
	t.Helper()
	return newStoreOn(t, newClient(t), opts...)
}

func newStoreOn(t testing.TB, c redis.UniversalClient, opts ...Option) *Store {
	t.Helper()
	// A loaded test machine can stall a command past the 2 s default; tests
	// of the bound itself pass their own WithTimeout, which comes later and
	// wins.
	s, err := New(c, append([]Option{WithPrefix(uniquePrefix()), WithCallerClock(), WithTimeout(testTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var t0 = time.UnixMilli(1_700_000_000_000)

// testTimeout bounds each operation of the test stores.
const testTimeout = 30 * time.Second

func put(t testing.TB, s store.Store, now time.Time, b store.Bucket) {
	t.Helper()
	if err := s.PutBucket(context.Background(), store.PutBucketRequest{Now: now, Bucket: b}); err != nil {
		t.Fatal(err)
	}
}
