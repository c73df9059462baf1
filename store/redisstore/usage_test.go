package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/store"
)

// tripHook counts round trips: single commands and pipelines, not a new
// connection's handshake. It is not safe for concurrent use.
type tripHook struct {
	trips, cmds atomic.Int64
	names       []string
}

func (h *tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "hello" || n == "client" { // a new connection's handshake
			return next(ctx, cmd)
		}
		h.trips.Add(1)
		h.cmds.Add(1)
		h.names = append(h.names, cmd.Name())
		return next(ctx, cmd)
	}
}
func (h *tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if n := cmds[0].Name(); n == "hello" || n == "client" { // a new connection's handshake
			return next(ctx, cmds)
		}
		h.trips.Add(1)
		h.cmds.Add(int64(len(cmds)))
		h.names = append(h.names, fmt.Sprintf("pipeline(%s×%d)", cmds[0].Name(), len(cmds)))
		return next(ctx, cmds)
	}
}

// TestUsageKeys checks the key layout of usage rows, their expiry, that a
// later put never brings an expiry earlier, and that a day of minute rows
// is read in two round trips, on a standalone server and on the Cluster
// (where every key of a dimension must share its slot).
func TestUsageKeys(t *testing.T) {
	clients := map[string]func(testing.TB) redis.UniversalClient{"standalone": standaloneClient, "cluster": clusterClient}
	for name, newC := range clients {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := newC(t)
			s := newStoreOn(t, c)
			hook := &tripHook{}
			c.AddHook(hook)
			hour := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
			var rows []store.UsageRow
			for k := -24 * 60; k < 60; k++ {
				rows = append(rows, store.UsageRow{Dimension: "openai#rpm", Caller: "alice", Period: time.Minute,
					Start: hour.Add(time.Duration(k) * time.Minute), Writer: "w1", Counters: map[string]int64{"grants": 1}, Updated: hour})
			}
			ret := store.UsageRetention{Minute: 30 * time.Hour}
			if err := s.PutUsage(ctx, rows, ret); err != nil {
				t.Fatal(err)
			}
			index := s.prefix + "{openai}:uim#rpm"
			key := fmt.Sprintf("%s{openai}:um:%d#rpm", s.prefix, hour.UnixMilli())
			if name == "cluster" {
				ks, err1 := c.ClusterKeySlot(ctx, key).Result()
				is, err2 := c.ClusterKeySlot(ctx, index).Result()
				if err1 != nil || err2 != nil || ks != is || ks != int64(Slot("openai")) {
					t.Errorf("slots of the bucket %d (%v) and of the index %d (%v), want both %d", ks, err1, is, err2, Slot("openai"))
				}
			}
			wantExp := hour.Add(time.Hour + 30*time.Hour).UnixMilli()
			if got := expireTime(t, c, key); got != wantExp {
				t.Errorf("expiry of %s = %d, want %d (bucket end + retention)", key, got, wantExp)
			}
			if got := expireTime(t, c, index); got != wantExp {
				t.Errorf("expiry of the index = %d, want %d (its newest bucket's)", got, wantExp)
			}
			// The minute rows are in 25 hourly hashes; rows of 30h ago and
			// more are past the retention and were skipped.
			n, err := c.ZCard(ctx, index).Result()
			if err != nil || n != 25 {
				t.Errorf("index holds %d buckets (%v), want 25", n, err)
			}
			// A shorter retention keeps the later expiry; a longer one
			// pushes it.
			for _, tt := range []struct {
				ret  time.Duration
				want int64
			}{{time.Hour, wantExp}, {40 * time.Hour, hour.Add(41 * time.Hour).UnixMilli()}} {
				if err := s.PutUsage(ctx, rows[24*60:24*60+1], store.UsageRetention{Minute: tt.ret}); err != nil {
					t.Fatal(err)
				}
				if got := expireTime(t, c, key); got != tt.want {
					t.Errorf("after a put with retention %s: expiry %d, want %d", tt.ret, got, tt.want)
				}
			}
			hook.trips.Store(0)
			got, err := s.ListUsage(ctx, store.UsageQuery{Dimension: "openai#rpm", Period: time.Minute,
				From: hour.Add(-24 * time.Hour), To: hour.Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 24*60+60 {
				t.Errorf("listed %d rows, want %d", len(got), 24*60+60)
			}
			if n := hook.trips.Load(); n != 2 {
				t.Errorf("a day of minute rows took %d round trips, want 2: %v", n, hook.names)
			}
		})
	}
}

// expireTime returns a key's absolute expiry in Unix ms (PEXPIRETIME).
func expireTime(t *testing.T, c redis.UniversalClient, key string) int64 {
	t.Helper()
	ms, err := c.Do(context.Background(), "pexpiretime", key).Int64()
	if err != nil {
		t.Fatalf("PEXPIRETIME %s: %v", key, err)
	}
	return ms
}

// TestUsagePutResent loses the reply to a usage put after the server ran
// it, so that go-redis sends the script again: the rows are as one put
// left them, and a stored row past its expiry, still in its hash, is not
// listed.
func TestUsagePutResent(t *testing.T) {
	ctx := context.Background()
	l := newLossyStore(t)
	if err := usagePutScript.Load(ctx, l.rdb).Err(); err != nil { // so that EVALSHA runs on the first send
		t.Fatal(err)
	}
	start := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	row := store.UsageRow{Dimension: "v#rpm", Caller: "alice", Period: time.Minute, Start: start, Writer: "w1", Counters: map[string]int64{"grants": 7}, Updated: start}
	lost := l.loseNextReply(usagePutScript)
	if err := l.PutUsage(ctx, []store.UsageRow{row}, store.UsageRetention{}); err != nil {
		t.Fatalf("PutUsage with its reply lost: %v", err)
	}
	if !lost() {
		t.Fatal("the proxy lost no reply: the test did not test a resend")
	}
	l.proxy.SetHook(nil)
	q := store.UsageQuery{Dimension: "v#rpm", Period: time.Minute, From: start, To: start.Add(time.Minute)}
	rows, err := l.ListUsage(ctx, q)
	if err != nil || len(rows) != 1 || rows[0].Counters["grants"] != 7 {
		t.Fatalf("ListUsage after a resent put = %+v, %v; want one row of 7 grants", rows, err)
	}

	// A row whose own expiry has passed, in a hash that lives on for
	// its newer rows, is left out.
	_, prefix, rest := l.usageKeys("v#rpm", time.Minute)
	key := prefix + strconv.FormatInt(start.Truncate(time.Hour).UnixMilli(), 10) + rest
	past := fmt.Sprintf(`{"c":{"grants":1},"x":%d}`, time.Now().Add(-time.Second).UnixMilli())
	if err := l.rdb.HSet(ctx, key, usageField(start.UnixMilli(), "bob", "w1"), past).Err(); err != nil {
		t.Fatal(err)
	}
	if rows, err := l.ListUsage(ctx, q); err != nil || len(rows) != 1 || rows[0].Caller != "alice" {
		t.Errorf("ListUsage = %+v, %v; want alice's row alone", rows, err)
	}
}
