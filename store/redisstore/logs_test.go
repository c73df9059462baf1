package redisstore

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// syncBuffer is a bytes.Buffer safe for go-redis's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// go-redis's dial errors go to the routed slog logger, not to standard
// error. The server is a loopback port with nothing listening.
func TestRouteRedisLogs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var buf syncBuffer
	RouteRedisLogs(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { RouteRedisLogs(slog.New(slog.NewTextHandler(os.Stderr, nil))) })
	RouteRedisLogs(nil) // ignored
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("ping reached a closed port")
	}
	got := buf.String()
	if !strings.Contains(got, "msg=redis.client_log") || !strings.Contains(got, "level=WARN") || !strings.Contains(got, "dial") {
		t.Errorf("log:\n%s\nwant a redis.client_log record of the dial failure", got)
	}
}
