package envoyrls_test

import (
	"context"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/service/envoyrls"
	"github.com/ontopix/sluice/store/memstore"
)

// lateClock is a clock the test moves.
type lateClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *lateClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *lateClock) add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// The end-of-stream call of a request that outlived lease_ttl is still
// its end: it opens no lease of its own (which would hold a stream slot
// for another lease_ttl with no end call to come, and charge the request
// twice), and settles its tokens.
func TestLateEndCallOpensNothing(t *testing.T) {
	clk := &lateClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	c, err := sluice.New(memstore.New(), sluice.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for _, b := range buckets {
		if err := c.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := envoyrls.ParseConfig("envoy.yaml", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	s, err := envoyrls.New(c, *cfg)
	if err != nil {
		t.Fatal(err)
	}
	envoyrls.SetNow(s, clk.Now)
	call := func(descs ...*ratelimitv3.RateLimitDescriptor) rlsv3.RateLimitResponse_Code {
		t.Helper()
		res, err := s.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: descs})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetOverallCode()
	}
	free := func() int64 {
		st, err := c.GetBucket(ctx, "openai#concurrent")
		if err != nil {
			t.Fatal(err)
		}
		return int64(st.Tokens) / 1000
	}
	// A stream holds a slot; a request without one holds its tokens' check.
	if got := call(desc("generic_key", "streams", "request_id", "s"), hits(desc("generic_key", "tokens", "model", "gpt-4o", "request_id", "s"), 0)); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("stream's first call: %v", got)
	}
	if got := call(hits(desc("generic_key", "tokens", "model", "gpt-4o", "request_id", "t"), 0)); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("request's first call: %v", got)
	}
	clk.add(90 * time.Second) // past lease_ttl (1m)
	if _, err := c.Reconcile(ctx, sluice.ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := free(); got != 2 {
		t.Fatalf("free streams after the reconcile: %d, want 2", got)
	}
	before := tokensOf(t, c, "openai#gpt-4o#tpm")
	if got := call(desc("generic_key", "streams", "request_id", "s"), hits(desc("generic_key", "tokens", "model", "gpt-4o", "request_id", "s"), 300)); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("stream's late end: %v", got)
	}
	if got := free(); got != 2 {
		t.Errorf("free streams after the stream's late end call: %d, want 2 (the end call opened a lease of its own)", got)
	}
	if got := call(hits(desc("generic_key", "tokens", "model", "gpt-4o", "request_id", "t"), 500)); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("request's late end: %v", got)
	}
	// Each settles its tokens less the check of 1 its first call charged:
	// 299 and 499 (the memory store takes an expired lease's charge).
	if got, want := tokensOf(t, c, "openai#gpt-4o#tpm"), before-798; got != want {
		t.Errorf("tokens after the late end calls: %d, want %d", got, want)
	}
}

func tokensOf(t *testing.T, c *sluice.Client, dim string) int64 {
	t.Helper()
	st, err := c.GetBucket(context.Background(), dim)
	if err != nil {
		t.Fatal(err)
	}
	return int64(st.Tokens) / 1000
}
