package service_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/service"
	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
	"github.com/ontopix/sluice/service/gen/sluice/v1/sluicev1connect"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/redisstore"
)

// stores are the store kinds every service test runs on.
var stores = []string{"memory", "redis"}

// open returns a store of the kind, on a server of its own.
func open(t *testing.T, kind string) store.Store {
	t.Helper()
	switch kind {
	case "memory":
		return memstore.New()
	case "redis":
		srv := redistest.New(t)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { _ = rdb.Close() })
		st, err := redisstore.New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	t.Fatalf("unknown store %q", kind)
	return nil
}

// served is a Sluice service on a test HTTP/2 server.
type served struct {
	srv  *service.Server
	lib  *sluice.Client
	http *httptest.Server
}

// serve starts the service on a store of the kind with the buckets given.
func serve(t *testing.T, kind string, buckets []sluice.Bucket, opts ...service.Option) *served {
	t.Helper()
	cfg := sluice.DefaultConfig()
	cfg.LeaseTTL = 30 * time.Second
	c, err := sluice.New(open(t, kind), sluice.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range buckets {
		if err := c.PutBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	s, err := service.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.EnableHTTP2 = true
	hs.StartTLS()
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Error(err)
		}
		_ = c.Close()
	})
	return &served{srv: s, lib: c, http: hs}
}

// protocols are the wire protocols every client test speaks.
var protocols = map[string][]connect.ClientOption{
	"connect-json": {connect.WithProtoJSON()},
	"connect":      nil,
	"grpc":         {connect.WithGRPC()},
	"grpc-web":     {connect.WithGRPCWeb()},
}

// client returns a LimiterService client speaking the protocol.
func (s *served) client(proto string) sluicev1connect.LimiterServiceClient {
	return sluicev1connect.NewLimiterServiceClient(s.http.Client(), s.http.URL, protocols[proto]...)
}

// items builds a request's items from dimension, cost pairs.
func items(pairs ...any) []*sluicev1.Item {
	var out []*sluicev1.Item
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, &sluicev1.Item{Dimension: pairs[i].(string), Cost: int64(pairs[i+1].(int))})
	}
	return out
}

// codeOf returns err's Connect code, failing the test when err is nil.
func codeOf(t *testing.T, err error) connect.Code {
	t.Helper()
	if err == nil {
		t.Fatal("got no error, want one")
	}
	return connect.CodeOf(err)
}

// post sends body to the service's method with the content type, as
// curl would, and returns the status and body.
func (s *served) post(t *testing.T, method, ctype, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.http.URL+"/sluice.v1.LimiterService/"+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := s.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
