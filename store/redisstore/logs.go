package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RouteRedisLogs sends go-redis's own messages (a failed dial, a pool
// hook's error, a recovered panic), which go-redis otherwise prints to
// standard error, to l instead: each is one record named
// "redis.client_log" at level Warn, with the message in its "message"
// attribute. A nil l is ignored.
//
// go-redis keeps one logger for the whole process (redis.SetLogger): it
// offers none per client, its messages name no client, and many come
// from its background goroutines with no request context, so they cannot
// be told apart by store. RouteRedisLogs is therefore a process-wide
// setting that this package never makes by itself: call it once, from
// main, with the logger the application gives its stores, as it would
// call slog.SetDefault. It replaces any logger set with redis.SetLogger
// before, and a later redis.SetLogger replaces it.
func RouteRedisLogs(l *slog.Logger) {
	if l == nil {
		return
	}
	redis.SetLogger(slogLogging{l})
}

// slogLogging adapts a slog.Logger to go-redis's logging interface.
type slogLogging struct{ l *slog.Logger }

// Printf logs one go-redis message.
func (s slogLogging) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	if !s.l.Enabled(ctx, slog.LevelWarn) {
		return
	}
	msg := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "), "\n")
	s.l.LogAttrs(ctx, slog.LevelWarn, "redis.client_log", slog.String("message", msg))
}
