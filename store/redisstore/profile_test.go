package redisstore

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// TestProfileAcquireScript runs 20,000 serial one-dimension acquisitions
// and logs the server's INFO commandstats (time per EVALSHA and per command
// the script calls) and the keys left, for docs/benchmarks.md. It runs only
// with SLUICE_PROFILE=1.
func TestProfileAcquireScript(t *testing.T) {
	if os.Getenv("SLUICE_PROFILE") == "" {
		t.Skip("set SLUICE_PROFILE=1 to profile the acquire script")
	}
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: standalone.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	s, err := New(c, WithPrefix(uniquePrefix()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := bucket.PerPeriod(bucket.Requests, bucket.MaxCapacity, time.Minute)
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: time.Now(), Bucket: store.Bucket{Name: "bench#rpm", Config: cfg}}); err != nil {
		t.Fatal(err)
	}
	items := []store.Item{{Dimension: "bench#rpm", Cost: 1}}
	c.ConfigResetStat(ctx)
	k0 := c.DBSize(ctx).Val()
	start := time.Now()
	const N = 20000
	for i := 0; i < N; i++ {
		var res store.AcquireResult
		req := store.AcquireRequest{Items: items, ID: store.NewLeaseID(), TTL: time.Minute}
		if err := s.Acquire(ctx, &req, &res); err != nil || !res.Granted {
			t.Fatal(err, res)
		}
	}
	el := time.Since(start)
	info := c.Info(ctx, "commandstats").Val()
	for _, l := range strings.Split(info, "\n") {
		if strings.Contains(l, "eval") || strings.Contains(l, "cmdstat_") {
			t.Log(strings.TrimSpace(l))
		}
	}
	t.Logf("%d acquires in %v (%v each); keys %d -> %d", N, el, el/N, k0, c.DBSize(ctx).Val())
}

// TestProfileScriptOverhead logs the server's time per EVALSHA of an empty
// script, of one that calls TIME and HMGET, and of the acquire script on a
// missing bucket: the fixed cost of a script and of each redis.call, for
// docs/benchmarks.md. It runs only with SLUICE_PROFILE=1.
func TestProfileScriptOverhead(t *testing.T) {
	if os.Getenv("SLUICE_PROFILE") == "" {
		t.Skip("set SLUICE_PROFILE=1 to profile script overhead")
	}
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: standalone.Addr})
	defer c.Close()
	for _, src := range []struct{ name, src string }{
		{"return1", "return 1"},
		{"core-wrapper-only", "local function core()\n" + coreLua + "return refillRaw, retryInRaw\nend\n return 1"},
		{"acquire-missing-bucket", acquireSrc + "\n"},
		{"tiny-hmget", "redis.call('TIME') return redis.call('HMGET', KEYS[1], 't', 'c', 'a', 'p', 'v', 'l', 'u')"},
	} {
		sc := redis.NewScript(src.src)
		c.ConfigResetStat(ctx)
		for i := 0; i < 5000; i++ {
			if src.name != "return1" && src.name != "core-wrapper-only" {
				sc.Run(ctx, c, []string{"nokey", "nokey2"}, -1, 60000, 0, 0, "id", "c", "tag", "", 1000, 0, "dim", 1, "", 60000)
			} else {
				sc.Run(ctx, c, nil)
			}
		}
		for _, l := range strings.Split(c.Info(ctx, "commandstats").Val(), "\n") {
			if strings.Contains(l, "evalsha") {
				t.Log(src.name, strings.TrimSpace(l))
			}
		}
	}
}
