package envoyrls_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/service/envoyrls"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/redisstore"
)

// config maps Envoy's descriptors as a gateway in front of OpenAI would
// send them: a generic_key naming the limit, the model from a request
// header, and the request id as the correlation key.
const config = `domain: llm
correlation_key: request_id
lease_ttl: 1m
rules:
  - entries: [generic_key=requests]
    dimension: "openai#rpm"
  - entries: [generic_key=tokens, model]
    dimension: "openai#{model}#tpm"
  - entries: [generic_key=streams]
    dimension: "openai#concurrent"
`

var buckets = []sluice.Bucket{
	{Name: "openai#rpm", Config: sluice.PerMinute(sluice.Requests, 3)},
	{Name: "openai#gpt-4o#tpm", Config: sluice.PerMinute(sluice.Tokens, 10_000)},
	{Name: "openai#concurrent", Config: sluice.ConcurrentLimit(2)},
}

// rig is the RLS on a store, behind a real gRPC client.
type rig struct {
	c    *sluice.Client
	rls  rlsv3.RateLimitServiceClient
	addr string // host:port of the server
}

func newRig(t *testing.T, kind string) *rig {
	t.Helper()
	var st store.Store = memstore.New()
	if kind == "redis" {
		srv := redistest.New(t)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { _ = rdb.Close() })
		var err error
		if st, err = redisstore.New(rdb); err != nil {
			t.Fatal(err)
		}
	}
	c, err := sluice.New(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for _, b := range buckets {
		if err := c.PutBucket(context.Background(), b); err != nil {
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
	mux := http.NewServeMux()
	mux.Handle(s.Handler())
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetHTTP1(true)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	t.Cleanup(hs.Close)
	conn, err := grpc.NewClient(strings.TrimPrefix(hs.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &rig{c: c, rls: rlsv3.NewRateLimitServiceClient(conn), addr: strings.TrimPrefix(hs.URL, "http://")}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// hits sets a descriptor's hits_addend.
func hits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func (r *rig) call(t *testing.T, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := r.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: descs})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// tokens returns a bucket's balance in whole tokens, rounded down.
func (r *rig) tokens(t *testing.T, dim string) int64 {
	t.Helper()
	st, err := r.c.GetBucket(context.Background(), dim)
	if err != nil {
		t.Fatal(err)
	}
	return int64(st.Tokens) / 1000
}

func header(res *rlsv3.RateLimitResponse, key string) string {
	for _, h := range res.GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetKey(), key) {
			return h.GetValue()
		}
	}
	return ""
}

// TestAllOrNothing spends the requests bucket: the call that finds it
// empty is over the limit and charges no tokens either.
func TestAllOrNothing(t *testing.T) {
	for _, kind := range []string{"memory", "redis"} {
		t.Run(kind, func(t *testing.T) {
			r := newRig(t, kind)
			for i := range 4 {
				res := r.call(t, desc("generic_key", "requests"), hits(desc("generic_key", "tokens", "model", "gpt-4o"), 1000))
				want := rlsv3.RateLimitResponse_OK
				if i == 3 {
					want = rlsv3.RateLimitResponse_OVER_LIMIT
				}
				if got := res.GetOverallCode(); got != want {
					t.Fatalf("call %d: got %v, want %v", i, got, want)
				}
				if i == 3 {
					if got, want := res.GetStatuses()[0].GetCode(), rlsv3.RateLimitResponse_OVER_LIMIT; got != want {
						t.Errorf("requests status: got %v, want %v", got, want)
					}
					if got, want := res.GetStatuses()[1].GetCode(), rlsv3.RateLimitResponse_OK; got != want {
						t.Errorf("tokens status: got %v, want %v (it had room)", got, want)
					}
					if got := header(res, "Retry-After"); got == "" || got == "0" {
						t.Errorf("Retry-After: got %q, want the seconds until a request is free", got)
					}
				}
			}
			if got := r.tokens(t, "openai#gpt-4o#tpm"); got < 7000 || got > 7010 {
				t.Errorf("tokens left: got %d, want 7,000 (3 grants of 1,000; the denied call charged nothing)", got)
			}
		})
	}
}

// TestStreamSettles sends what Envoy sends for a streamed completion with
// apply_on_stream_done: a first call with hits 0 on the tokens limit and 1
// on the streams limit, then at the end of the stream the same descriptors
// with the tokens the stream used.
func TestStreamSettles(t *testing.T) {
	for _, kind := range []string{"memory", "redis"} {
		t.Run(kind, func(t *testing.T) {
			r := newRig(t, kind)
			first := func(id string) *rlsv3.RateLimitResponse {
				return r.call(t, desc("generic_key", "streams", "request_id", id), hits(desc("generic_key", "tokens", "model", "gpt-4o", "request_id", id), 0))
			}
			end := func(id string, n uint64, negative bool) {
				d := hits(desc("generic_key", "tokens", "model", "gpt-4o", "request_id", id), n)
				d.IsNegativeHits = negative
				if res := r.call(t, desc("generic_key", "streams", "request_id", id), d); res.GetOverallCode() != rlsv3.RateLimitResponse_OK {
					t.Fatalf("end of %s: got %v, want OK", id, res.GetOverallCode())
				}
			}
			for _, id := range []string{"a", "b"} {
				if got := first(id).GetOverallCode(); got != rlsv3.RateLimitResponse_OK {
					t.Fatalf("first call of %s: got %v", id, got)
				}
			}
			if got := first("c").GetOverallCode(); got != rlsv3.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("a third stream: got %v, want OVER_LIMIT (2 slots held)", got)
			}
			end("a", 2500, false)
			end("c", 9999, false) // denied: its end charges nothing
			if got := first("d").GetOverallCode(); got != rlsv3.RateLimitResponse_OK {
				t.Fatalf("after a's end: got %v, want its slot", got)
			}
			end("b", 0, false)
			end("d", 300, true) // refunds the check of d: nothing charged beyond 0
			st, err := r.c.GetBucket(context.Background(), "openai#concurrent")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := int64(st.Tokens)/1000, int64(2); got != want {
				t.Errorf("free streams after every end: got %d, want %d", got, want)
			}
			// 2,500 for a, 0 for b, d's check refunded; the refill adds a few.
			if got := r.tokens(t, "openai#gpt-4o#tpm"); got < 7500 || got > 7510 {
				t.Errorf("tokens left: got %d, want 7,500", got)
			}
		})
	}
}

// TestUnlimited answers OK for a descriptor no rule maps and for another
// domain, without touching a bucket.
func TestUnlimited(t *testing.T) {
	r := newRig(t, "memory")
	res := r.call(t, desc("remote_address", "10.0.0.1"))
	if res.GetOverallCode() != rlsv3.RateLimitResponse_OK || len(res.GetStatuses()) != 1 {
		t.Errorf("unmapped descriptor: got %v", res)
	}
	other, err := r.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "web", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("generic_key", "requests")}})
	if err != nil || other.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Errorf("another domain: got %v, %v", other, err)
	}
	if got, want := r.tokens(t, "openai#rpm"), int64(3); got != want {
		t.Errorf("requests left: got %d, want %d", got, want)
	}
}

// TestHeaders checks the RateLimit-Policy and RateLimit fields and the
// descriptor status Envoy reads.
func TestHeaders(t *testing.T) {
	r := newRig(t, "memory")
	res := r.call(t, hits(desc("generic_key", "tokens", "model", "gpt-4o"), 4000))
	if got, want := header(res, "RateLimit-Policy"), `"openai#gpt-4o#tpm";q=10000;w=60`; got != want {
		t.Errorf("RateLimit-Policy: got %q, want %q", got, want)
	}
	if got := header(res, "RateLimit"); !strings.HasPrefix(got, `"openai#gpt-4o#tpm";r=6000;t=`) {
		t.Errorf("RateLimit: got %q, want 6,000 remaining", got)
	}
	st := res.GetStatuses()[0]
	if got, want := st.GetCurrentLimit().GetUnit(), rlsv3.RateLimitResponse_RateLimit_MINUTE; got != want {
		t.Errorf("unit: got %v, want %v", got, want)
	}
	if got, want := st.GetCurrentLimit().GetRequestsPerUnit(), uint32(10_000); got != want {
		t.Errorf("requests per unit: got %d, want %d", got, want)
	}
	if got, want := st.GetLimitRemaining(), uint32(6000); got != want {
		t.Errorf("remaining: got %d, want %d", got, want)
	}
}

// TestErrors: a rule naming a dimension with no bucket, and a cost above a
// bucket's capacity, are errors (Envoy applies its failure mode), each
// naming the dimension.
func TestErrors(t *testing.T) {
	r := newRig(t, "memory")
	tests := []struct {
		name string
		d    *ratelimitv3.RateLimitDescriptor
		code codes.Code
		msg  string
	}{
		{"no bucket", desc("generic_key", "tokens", "model", "gpt-5"), codes.NotFound, "openai#gpt-5#tpm"},
		{"above capacity", hits(desc("generic_key", "tokens", "model", "gpt-4o"), 20_000), codes.InvalidArgument, "openai#gpt-4o#tpm"},
		{"hits beyond any bucket", hits(desc("generic_key", "tokens", "model", "gpt-4o"), 1<<63), codes.InvalidArgument, "openai#gpt-4o#tpm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: []*ratelimitv3.RateLimitDescriptor{tt.d}})
			if got := status.Code(err); got != tt.code {
				t.Errorf("code: got %v (%v), want %v", got, err, tt.code)
			}
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %v does not name %q", err, tt.msg)
			}
		})
	}
}

// TestCurrentLimitUnits checks how a bucket's rate reads in Envoy's units.
func TestCurrentLimitUnits(t *testing.T) {
	tests := []struct {
		cfg  sluice.Bucket
		unit rlsv3.RateLimitResponse_RateLimit_Unit
		n    uint32
	}{
		{sluice.Bucket{Name: "a", Config: sluice.PerMinute(sluice.Requests, 600)}, rlsv3.RateLimitResponse_RateLimit_MINUTE, 600},
		{sluice.Bucket{Name: "b", Config: sluice.PerPeriod(sluice.Requests, 500, 61225*time.Millisecond)}, rlsv3.RateLimitResponse_RateLimit_MINUTE, 489},
		{sluice.Bucket{Name: "c", Config: sluice.PerPeriod(sluice.Requests, 1, 10*time.Second)}, rlsv3.RateLimitResponse_RateLimit_MINUTE, 6},
		{sluice.Bucket{Name: "d", Config: sluice.PerPeriod(sluice.Requests, 5, 100*time.Millisecond)}, rlsv3.RateLimitResponse_RateLimit_SECOND, 50},
		{sluice.Bucket{Name: "e", Config: sluice.PerPeriod(sluice.Requests, 1, 48*time.Hour)}, rlsv3.RateLimitResponse_RateLimit_DAY, 0},
		{sluice.Bucket{Name: "f", Config: sluice.ConcurrentLimit(4)}, rlsv3.RateLimitResponse_RateLimit_UNKNOWN, 4},
	}
	for _, tt := range tests {
		l := envoyrls.CurrentLimit(tt.cfg.Name, tt.cfg.Config)
		if l.GetUnit() != tt.unit || l.GetRequestsPerUnit() != tt.n {
			t.Errorf("%s: got %d per %v, want %d per %v", tt.cfg.Name, l.GetRequestsPerUnit(), l.GetUnit(), tt.n, tt.unit)
		}
	}
}

// TestTwoRequestIDs refuses a call whose descriptors carry two request ids
// (one call is one request), naming both, and charges nothing.
func TestTwoRequestIDs(t *testing.T) {
	r := newRig(t, "memory")
	_, err := r.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		desc("generic_key", "requests", "request_id", "a"), desc("generic_key", "streams", "request_id", "b"),
	}})
	if got := status.Code(err); got != codes.InvalidArgument || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("got %v (%v), want InvalidArgument naming both ids", got, err)
	}
	if got, want := r.tokens(t, "openai#rpm"), int64(3); got != want {
		t.Errorf("requests left: got %d, want %d", got, want)
	}
}
