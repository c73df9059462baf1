package envoyrls_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/service/envoyrls"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// TestSmallAnswersUncompressed asks with Accept-Encoding: gzip, as Connect
// clients do: a decision's answer goes out uncompressed, since compressing
// a few dozen bytes costs more CPU than the whole decision.
func TestSmallAnswersUncompressed(t *testing.T) {
	r := newRig(t, "memory")
	body := `{"domain": "llm", "descriptors": [{"entries": [{"key": "generic_key", "value": "requests"}]}]}`
	req, err := http.NewRequest(http.MethodPost, "http://"+r.addr+envoyrls.Procedure, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if got := resp.Header.Get("Content-Encoding"); got != "" {
		t.Errorf("Content-Encoding of a %d-byte answer: got %q, want none", len(b), got)
	}
}

// TestOversizedRequestRefused sends a request larger than the handler's
// default bound (64 KiB): it is refused before it is decoded, however
// large a size the sender declares.
func TestOversizedRequestRefused(t *testing.T) {
	r := newRig(t, "memory")
	body := `{"domain": "llm", "descriptors": [{"entries": [{"key": "generic_key", "value": "` + strings.Repeat("x", 70<<10) + `"}]}]}`
	req, err := http.NewRequest(http.MethodPost, "http://"+r.addr+envoyrls.Procedure, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "resource_exhausted") {
		t.Errorf("a %d-byte request: got %d %s, want 429 resource_exhausted", len(body), resp.StatusCode, b)
	}
}

// TestStreamEndSettlesPastTheCallsDeadline sends the end-of-stream call
// with a context that is already over, as Envoy's short timeout (20 ms by
// default) leaves it when the store is slow: the answer no longer
// matters, but the settlement and the release must still be made, or the
// tokens go uncounted and the stream's slot stays held until the lease's
// TTL.
func TestStreamEndSettlesPastTheCallsDeadline(t *testing.T) {
	c, s := directServer(t, ctxStore{memstore.New()}, buckets)
	bg := context.Background()
	req := func(n uint64) *rlsv3.RateLimitRequest {
		return &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			desc("generic_key", "streams", "request_id", "r1"), hits(desc("generic_key", "tokens", "model", "gpt-4o", "request_id", "r1"), n)}}
	}
	if res, err := s.ShouldRateLimit(bg, req(0)); err != nil || res.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("first call: %v, %v", res, err)
	}
	over, cancel := context.WithCancel(bg)
	cancel()
	_, _ = s.ShouldRateLimit(over, req(2500))
	for _, tt := range []struct {
		dim  string
		want int64
	}{{"openai#concurrent", 2}, {"openai#gpt-4o#tpm", 7500}} {
		st, err := c.GetBucket(bg, tt.dim)
		if err != nil {
			t.Fatal(err)
		}
		if got := int64(st.Tokens) / 1000; got < tt.want || got > tt.want+10 {
			t.Errorf("%s after the stream's end: got %d, want %d", tt.dim, got, tt.want)
		}
	}
}

// ctxStore fails a settlement or a release whose context is over, as a
// store across the network does.
type ctxStore struct{ store.Store }

func (s ctxStore) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	if err := ctx.Err(); err != nil {
		return store.Settlement{}, err
	}
	return s.Store.Adjust(ctx, req)
}

func (s ctxStore) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	if err := ctx.Err(); err != nil {
		return store.ReleaseResult{}, err
	}
	return s.Store.Release(ctx, req)
}

// slowRelease takes 50 ms over every Release, as a store far away does.
type slowRelease struct{ store.Store }

func (s slowRelease) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	select {
	case <-time.After(50 * time.Millisecond):
	case <-ctx.Done():
		return store.ReleaseResult{}, ctx.Err()
	}
	return s.Store.Release(ctx, req)
}

// TestCloseReleasesInParallel closes the service with 100 streams open on
// a store that takes 50 ms per release, within 2 s: one release after
// another would free 40 of the slots and leave the rest held until the
// leases' TTL.
func TestCloseReleasesInParallel(t *testing.T) {
	c, s := directServer(t, slowRelease{memstore.New()}, []sluice.Bucket{{Name: "openai#concurrent", Config: sluice.ConcurrentLimit(100)}})
	bg := context.Background()
	for i := range 100 {
		req := &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			desc("generic_key", "streams", "request_id", fmt.Sprint("r", i))}}
		if res, err := s.ShouldRateLimit(bg, req); err != nil || res.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("stream %d: %v, %v", i, res, err)
		}
	}
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	defer cancel()
	_ = s.Close(ctx)
	st, err := c.GetBucket(bg, "openai#concurrent")
	if err != nil {
		t.Fatal(err)
	}
	if got := int64(st.Tokens) / 1000; got != 100 {
		t.Errorf("free streams after Close: got %d, want 100", got)
	}
}

// directServer is the RLS, called directly (no HTTP), on a Client over st
// holding bs, with the tests' configuration.
func directServer(t *testing.T, st store.Store, bs []sluice.Bucket) (*sluice.Client, *envoyrls.Server) {
	t.Helper()
	c, err := sluice.New(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for _, b := range bs {
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
	return c, s
}
