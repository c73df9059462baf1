package redisstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/lib.lua
var libLua string

//go:embed lua/keys.lua
var keysLua string

//go:embed lua/acquire.lua
var acquireLua string

//go:embed lua/release.lua
var releaseLua string

//go:embed lua/extend.lua
var extendLua string

//go:embed lua/adjust.lua
var adjustLua string

//go:embed lua/penalize.lua
var penalizeLua string

//go:embed lua/peek.lua
var peekLua string

//go:embed lua/put.lua
var putLua string

//go:embed lua/delete.lua
var deleteLua string

//go:embed lua/list.lua
var listLua string

//go:embed lua/leases.lua
var leasesLua string

//go:embed lua/reconcile.lua
var reconcileLua string

// Every script is lib.lua (and keys.lua when it derives keys) followed by
// its body, so each is self-contained
// and cached by the server under its own SHA-1.
var (
	acquireScript   = redis.NewScript(libLua + acquireLua)
	releaseScript   = redis.NewScript(libLua + keysLua + releaseLua)
	extendScript    = redis.NewScript(libLua + keysLua + extendLua)
	adjustScript    = redis.NewScript(libLua + keysLua + adjustLua)
	penalizeScript  = redis.NewScript(libLua + penalizeLua)
	peekScript      = redis.NewScript(libLua + peekLua)
	putScript       = redis.NewScript(libLua + putLua)
	deleteScript    = redis.NewScript(deleteLua)
	listScript      = redis.NewScript(libLua + keysLua + listLua)
	leasesScript    = redis.NewScript(libLua + keysLua + leasesLua)
	reconcileScript = redis.NewScript(libLua + keysLua + reconcileLua)
)

// run runs a script (EVALSHA, then EVAL on NOSCRIPT) and returns its array
// reply.
func (s *Store) run(ctx context.Context, op string, sc *redis.Script, keys []string, args ...any) ([]any, error) {
	v, err := sc.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return nil, fail(op, err)
	}
	return v, nil
}

// reply reads a script's array reply.
type reply struct {
	v   []any
	i   int
	err error
}

func (r *reply) int() int64 {
	if r.i >= len(r.v) {
		r.err = fmt.Errorf("redisstore: short script reply (%d values)", len(r.v))
		return 0
	}
	x, ok := r.v[r.i].(int64)
	if !ok && r.err == nil {
		r.err = fmt.Errorf("redisstore: script reply %d is %T, want an integer", r.i, r.v[r.i])
	}
	r.i++
	return x
}

func (r *reply) str() string {
	if r.i >= len(r.v) {
		r.err = fmt.Errorf("redisstore: short script reply (%d values)", len(r.v))
		return ""
	}
	x, ok := r.v[r.i].(string)
	if !ok && r.err == nil {
		r.err = fmt.Errorf("redisstore: script reply %d is %T, want a string", r.i, r.v[r.i])
	}
	r.i++
	return x
}

func (r *reply) more() bool { return r.i < len(r.v) }
