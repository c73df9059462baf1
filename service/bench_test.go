package service_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/service"
	"github.com/ontopix/sluice/service/envoyrls"
	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
	"github.com/ontopix/sluice/service/gen/sluice/v1/sluicev1connect"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/redisstore"
)

// rlsConns is how many connections the RLS benchmark spreads its calls over.
var rlsConns = 2

// benchBucket never runs out during a benchmark.
var benchBucket = sluice.Bucket{Name: "b#rpm", Config: sluice.PerPeriod(sluice.Requests, 1_000_000_000, time.Second)}

// benchStores open the stores the benchmarks compare on.
func benchStore(b *testing.B, kind string) store.Store {
	if kind == "memory" {
		return memstore.New()
	}
	srv := redistest.New(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { _ = rdb.Close() })
	st, err := redisstore.New(rdb)
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// benchServer serves the API and Envoy's RLS over h2c on the store.
func benchServer(b *testing.B, st store.Store) (*sluice.Client, string) {
	c, err := sluice.New(st)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	if err := c.PutBucket(context.Background(), benchBucket); err != nil {
		b.Fatal(err)
	}
	s, err := service.New(c)
	if err != nil {
		b.Fatal(err)
	}
	rls, err := envoyrls.New(c, envoyrls.Config{Domain: "d", Rules: []envoyrls.Rule{{Entries: []string{"generic_key=b"}, Dimension: "b#rpm"}}})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", s.Handler())
	mux.Handle(rls.Handler())
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetHTTP1(true)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	b.Cleanup(hs.Close)
	return c, hs.URL
}

// latencies records call durations and reports their p50 and p99.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	slices.Sort(l.d)
	if len(l.d) == 0 {
		return
	}
	b.ReportMetric(float64(l.d[len(l.d)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(l.d[len(l.d)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkAcquire measures one acquisition of one dimension, on memory
// and on Redis: directly through the library, through the API (Connect
// over HTTP/1.1 and gRPC over h2c) and through Envoy's RLS (gRPC), each
// serial and with 32 concurrent callers.
func BenchmarkAcquire(b *testing.B) {
	for _, kind := range []string{"memory", "redis"} {
		for _, par := range []int{1, 32} {
			for _, path := range []string{"direct", "connect", "grpc", "rls"} {
				b.Run(kind+"/"+path+"/callers="+itoa(par), func(b *testing.B) {
					c, url := benchServer(b, benchStore(b, kind))
					call := caller(b, c, url, path)
					var lat latencies
					var wg sync.WaitGroup
					next := make(chan struct{}, b.N)
					for range b.N {
						next <- struct{}{}
					}
					close(next)
					b.ResetTimer()
					for range par {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for range next {
								t0 := time.Now()
								if err := call(); err != nil {
									b.Error(err)
									return
								}
								lat.add(time.Since(t0))
							}
						}()
					}
					wg.Wait()
					b.StopTimer()
					lat.report(b)
				})
			}
		}
	}
}

// caller returns one acquisition by path.
func caller(b *testing.B, c *sluice.Client, url, path string) func() error {
	ctx := context.Background()
	h2c := &http.Client{Transport: &http.Transport{Protocols: h2cProtocols(), MaxIdleConnsPerHost: 64}}
	switch path {
	case "direct":
		return func() error {
			res, err := c.Acquire(ctx, "b#rpm")
			if err == nil && res.Lease != nil {
				err = res.Lease.Release(ctx)
			}
			return err
		}
	case "connect", "grpc":
		cl := sluicev1connect.NewLimiterServiceClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, url)
		if path == "grpc" {
			cl = sluicev1connect.NewLimiterServiceClient(h2c, url, connect.WithGRPC())
		}
		req := &sluicev1.AcquireRequest{Items: []*sluicev1.Item{{Dimension: "b#rpm", Cost: 1}}}
		return func() error {
			res, err := cl.Acquire(ctx, connect.NewRequest(req))
			if err != nil {
				return err
			}
			_, err = cl.Release(ctx, connect.NewRequest(&sluicev1.ReleaseRequest{LeaseId: res.Msg.GetLease().GetId()}))
			return err
		}
	}
	// Envoy keeps one HTTP/2 connection to the service per worker thread
	// (by default one worker per core): 2 here.
	var clients []rlsv3.RateLimitServiceClient
	for range rlsConns {
		conn, err := grpc.NewClient(strings.TrimPrefix(url, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		clients = append(clients, rlsv3.NewRateLimitServiceClient(conn))
	}
	req := &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "b"}}}}}
	var n atomic.Uint64
	return func() error {
		_, err := clients[n.Add(1)%uint64(len(clients))].ShouldRateLimit(ctx, req)
		return err
	}
}

func h2cProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return p
}

func itoa(n int) string {
	if n == 1 {
		return "1"
	}
	return "32"
}

// BenchmarkIdleConnection reports the memory the server holds per idle
// client connection (HTTP/1.1 keep-alive), from the heap before and after
// 500 connections made one call each and stayed open.
func BenchmarkIdleConnection(b *testing.B) {
	for range b.N {
		_, url := benchServer(b, memstore.New())
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		const n = 500
		var clients []*http.Client
		for range n {
			hc := &http.Client{Transport: &http.Transport{}}
			cl := sluicev1connect.NewLimiterServiceClient(hc, url)
			if _, err := cl.Peek(context.Background(), connect.NewRequest(&sluicev1.PeekRequest{})); err != nil {
				b.Fatal(err)
			}
			clients = append(clients, hc)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		// The clients' side is in this process too: the growth of both
		// sides per connection bounds the server's share from above.
		b.ReportMetric(float64(after.HeapInuse+after.StackInuse-before.HeapInuse-before.StackInuse)/n/1024, "KiB/conn(both-sides)")
		for _, hc := range clients {
			hc.CloseIdleConnections()
		}
	}
}
