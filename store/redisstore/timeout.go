package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTimeout bounds every operation of a Store built without
// WithTimeout.
const DefaultTimeout = 2 * time.Second

// honoursContext reports whether rdb bounds its commands by their context's
// deadline itself: go-redis does only when the client was built with
// ContextTimeoutEnabled; otherwise it waits for its own dial, read and
// write timeouts (and retries), whatever the context says.
func honoursContext(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// bounded runs fn, which sends commands through the client under ctx, and
// returns its error, or ctx's error as soon as ctx ends, whichever comes
// first. When the client honours deadlines and ctx has one, fn runs on the
// caller's goroutine (the hot path: no goroutine, no allocation). Otherwise
// fn runs on a goroutine of its own, which an ended ctx abandons: fn must
// write only what the caller reads after a nil error, and the abandoned
// command finishes (or fails) on the client's own timeouts, as any command
// whose reply is lost: it may still have run on the server.
func bounded(ctx context.Context, honours bool, fn func() error) error {
	if ctx.Done() == nil { // nothing can end ctx
		return fn()
	}
	if _, ok := ctx.Deadline(); ok && honours {
		return fn()
	}
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
