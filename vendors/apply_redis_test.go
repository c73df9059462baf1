package vendors_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/store/redisstore"
	"github.com/ontopix/sluice/vendors"
)

// redisFleet is two processes of a fleet sharing one real redis-server:
// each its own go-redis client, store, Client and Reactor, on one manual
// clock (the store decides at the caller's clock).
type redisFleet struct {
	ctx     context.Context
	clock   *manualClock
	profile vendors.Profile
	clients [2]*sluice.Client
	tpm     string
}

func newRedisFleet(t *testing.T) *redisFleet {
	t.Helper()
	srv := redistest.New(t)
	f := &redisFleet{ctx: context.Background(), clock: &manualClock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}}
	p, err := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 600, TPM: 60_000}, vendors.WithHeadroom(0))
	if err != nil {
		t.Fatal(err)
	}
	f.profile = p
	f.tpm, _ = p.Dimension(vendors.Tokens)
	for i := range f.clients {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { _ = rdb.Close() })
		st, err := redisstore.New(rdb, redisstore.WithCallerClock(), redisstore.WithPrefix(t.Name()+":"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		cfg := sluice.DefaultConfig()
		cfg.OpTimeout = 30 * time.Second
		if f.clients[i], err = sluice.New(st, sluice.WithConfig(cfg), sluice.WithClock(f.clock)); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range p.Buckets() {
		if err := f.clients[0].PutBucket(f.ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *redisFleet) reactor(i int) *vendors.Reactor {
	return vendors.NewReactor(f.clients[i], f.profile, vendors.WithReactorClock(f.clock))
}

func (f *redisFleet) state(t *testing.T, i int) sluice.BucketState {
	t.Helper()
	s, err := f.clients[i].GetBucket(f.ctx, f.tpm)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReactorRedisFleet: what one process's Reactor makes of a response
// holds for the other process through a real redis-server: a 429's
// cooldown, a header sync, and a lowered limit followed and restored.
func TestReactorRedisFleet(t *testing.T) {
	f := newRedisFleet(t)
	a, b := f.reactor(0), f.reactor(1)

	// Sync: process 0 sees 41,000 tokens remaining; process 1's bucket holds no more.
	h := header("x-ratelimit-limit-tokens", "60000", "x-ratelimit-remaining-tokens", "41000", "x-ratelimit-reset-tokens", "19s")
	if re, err := a.Observe(f.ctx, 200, h, nil); err != nil || len(re.Synced) != 1 {
		t.Fatalf("Observe(200) = %+v, %v; want tpm synced", re, err)
	}
	if got := f.state(t, 1).Tokens.Tokens(); got != 41_000 {
		t.Errorf("process 1 sees tpm = %v, want 41000", got)
	}

	// Limit following: process 0 sees the limit halved; process 1's bucket
	// is halved, and process 1's own Reactor restores it at the full limit.
	full := f.state(t, 1).Bucket.Config
	if re := believe(t, a, f.clock, f.profile, header("x-ratelimit-limit-tokens", "30000")); len(re.Resized) != 1 {
		t.Fatalf("Observe(limit 30000) = %+v; want tpm resized", re)
	}
	if got := f.state(t, 1); got.Capacity != full.Capacity/2 || got.RefillAmount != full.RefillAmount/2 || got.Tokens.Tokens() != 30_000 {
		t.Errorf("process 1 sees capacity %d, refill %d, balance %v; want %d, %d, 30000",
			got.Capacity, got.RefillAmount, got.Tokens.Tokens(), full.Capacity/2, full.RefillAmount/2)
	}
	if re, err := b.Observe(f.ctx, 200, header("x-ratelimit-limit-tokens", "60000"), nil); err != nil || len(re.Resized) != 1 {
		t.Fatalf("process 1 at the full limit: %+v, %v; want tpm restored", re, err)
	}
	if got := f.state(t, 0).Bucket.Config; got != full {
		t.Errorf("process 0 sees %+v, want %+v", got, full)
	}

	// Cooldown: process 0 gets a 429 asking for 60 s; process 1 is denied
	// until then, and granted after.
	re, err := a.Observe(f.ctx, 429, header("retry-after-ms", "60000"), []byte(openAITPM429))
	if err != nil || len(re.Cooled) != 1 || re.Cooled[0] != f.tpm {
		t.Fatalf("Observe(429) = %+v, %v; want tpm cooled down", re, err)
	}
	until := f.clock.Now().Add(time.Minute)
	if got := f.state(t, 1).CooldownUntil; !got.Equal(until) {
		t.Errorf("process 1 sees the cooldown until %v, want %v", got, until)
	}
	f.clock.advance(time.Minute - time.Millisecond)
	r, err := f.clients[1].Acquire(f.ctx, f.tpm, sluice.WithCost(1))
	if err != nil {
		t.Fatal(err)
	}
	// 1 ms to the cooldown's end, then 1 ms to earn the token (60,000 per minute).
	if r.Granted() || r.RetryIn != 2*time.Millisecond {
		t.Errorf("process 1, 1 ms before the cooldown's end: granted %v, retry in %s; want denied, 2ms", r.Granted(), r.RetryIn)
	}
	f.clock.advance(100 * time.Millisecond) // the bucket earns 98 tokens from the cooldown's end
	if r, err = f.clients[1].Acquire(f.ctx, f.tpm, sluice.WithCost(50)); err != nil || !r.Granted() {
		t.Errorf("process 1 after the cooldown: %+v, %v; want granted", r, err)
	}
}
