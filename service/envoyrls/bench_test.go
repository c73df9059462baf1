package envoyrls_test

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/service/envoyrls"
	"github.com/ontopix/sluice/store/memstore"
)

// BenchmarkShouldRateLimit measures the server's own work for one call on
// the memory store, without the gRPC transport: mapping the descriptors,
// the acquisition and the answer with its headers. One descriptor per
// call, as a gateway limiting requests sends it, and three (requests,
// tokens of a model and a stream slot, with a request id).
func BenchmarkShouldRateLimit(b *testing.B) {
	cfg, err := envoyrls.ParseConfig("bench.yaml", []byte(config))
	if err != nil {
		b.Fatal(err)
	}
	entry := func(k, v string) *ratelimitv3.RateLimitDescriptor_Entry {
		return &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v}
	}
	for _, tt := range []struct {
		name string
		desc []*ratelimitv3.RateLimitDescriptor
	}{
		{"1 descriptor", []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("generic_key", "requests")}}}},
		{"3 descriptors", []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("generic_key", "requests")}},
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("generic_key", "tokens"), entry("model", "gpt-4o")}},
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("generic_key", "streams")}},
		}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			c, err := sluice.New(memstore.New())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			for _, bk := range []sluice.Bucket{
				{Name: "openai#rpm", Config: sluice.PerPeriod(sluice.Requests, 1<<36, time.Second)},
				{Name: "openai#gpt-4o#tpm", Config: sluice.PerPeriod(sluice.Tokens, 1<<36, time.Second)},
				{Name: "openai#concurrent", Config: sluice.ConcurrentLimit(1 << 20)},
			} {
				if err := c.PutBucket(ctx, bk); err != nil {
					b.Fatal(err)
				}
			}
			s, err := envoyrls.New(c, *cfg)
			if err != nil {
				b.Fatal(err)
			}
			req := &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: tt.desc}
			b.ReportAllocs()
			for b.Loop() {
				res, err := s.ShouldRateLimit(ctx, req)
				if err != nil || res.GetOverallCode() != rlsv3.RateLimitResponse_OK {
					b.Fatalf("ShouldRateLimit = %v, %v", res, err)
				}
			}
		})
	}
}
