package redisstore

import (
	"context"
	_ "embed"
	"encoding/hex"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/store"
)

//go:embed lua/core.lua
var coreLua string

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

//go:embed lua/cooldown.lua
var cooldownLua string

//go:embed lua/sync.lua
var syncLua string

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

//go:embed lua/reserve.lua
var reserveLua string

//go:embed lua/cancel.lua
var cancelLua string

//go:embed lua/unreserve.lua
var unreserveLua string

//go:embed lua/dequeue.lua
var dequeueLua string

//go:embed lua/op.lua
var opLua string

//go:embed lua/opclaim.lua
var opClaimLua string

//go:embed lua/opclaim_end.lua
var opClaimEndLua string

// once wraps a script body so that it runs at most once per operation id
// (see op.lua): its ARGV gain two at the end, the operation's key and its
// expiry in ms.
func once(body string) string { return "local function body()\n" + body + "\nend\n" + opLua }

// Every script is core.lua, then lib.lua (and keys.lua when it derives
// keys), then its body, so each is self-contained and cached by the server
// under its own SHA-1. acquire.lua, the hot path, needs core.lua alone, and
// wrapped in a function it calls only when it needs it: Redis re-creates a
// script's functions on every call. It claims its operation with
// opclaim.lua rather than once(): one command (SET NX) on a fresh grant
// instead of a GET and a SET, and none on a denial that was never granted
// but the GET that recognises a resend.
var acquireSrc = "local function core()\n" + coreLua + "return refillRaw, retryInRaw\nend\n" + opClaimLua +
	"local function body()\n" + acquireLua + "\nend\n" + opClaimEndLua

var (
	acquireScript   = redis.NewScript(acquireSrc)
	releaseScript   = redis.NewScript(coreLua + libLua + keysLua + once(releaseLua))
	extendScript    = redis.NewScript(coreLua + libLua + keysLua + extendLua)
	adjustScript    = redis.NewScript(coreLua + libLua + keysLua + once(adjustLua))
	penalizeScript  = redis.NewScript(coreLua + libLua + once(penalizeLua))
	cooldownScript  = redis.NewScript(coreLua + libLua + cooldownLua)
	syncScript      = redis.NewScript(coreLua + libLua + syncLua)
	peekScript      = redis.NewScript(coreLua + libLua + peekLua)
	putScript       = redis.NewScript(coreLua + libLua + once(putLua))
	deleteScript    = redis.NewScript(once(deleteLua))
	listScript      = redis.NewScript(coreLua + libLua + keysLua + listLua)
	leasesScript    = redis.NewScript(coreLua + libLua + keysLua + leasesLua)
	reconcileScript = redis.NewScript(coreLua + libLua + keysLua + reconcileLua)
	reserveScript   = redis.NewScript(coreLua + libLua + keysLua + once(reserveLua))
	cancelScript    = redis.NewScript(coreLua + libLua + keysLua + once(cancelLua))
	unreserveScript = redis.NewScript(coreLua + libLua + once(unreserveLua))
	dequeueScript   = redis.NewScript(coreLua + libLua + dequeueLua)
)

// run runs a script (EVALSHA, then EVAL on NOSCRIPT) and returns its array
// reply.
func (s *Store) run(ctx context.Context, op string, sc *redis.Script, keys []string, args ...any) ([]any, error) {
	var v []any
	err := bounded(ctx, s.honours, func() (err error) {
		v, err = sc.Run(ctx, s.rdb, keys, args...).Slice()
		return err
	})
	if err != nil {
		return nil, fail(op, err)
	}
	return v, nil
}

// runW runs a script that writes and returns its array reply (see write).
func (s *Store) runW(ctx context.Context, op string, sc *redis.Script, keys []string, args ...any) ([]any, error) {
	cmd, err := s.write(ctx, op, sc, keys, args...)
	if err != nil {
		return nil, err
	}
	v, err := cmd.Slice()
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

// acquireInline is how many items an acquireCall holds without a second
// allocation.
const acquireInline = 3

// acquireArgs is how many ARGV the acquire script takes before its items.
const acquireArgs = 10

// acquireOpArgs is how many ARGV follow the items: the operation's key and
// its expiry (see op.lua).
const acquireOpArgs = 2

// The acquire script's hash and source, boxed once.
var (
	acquireSHAArg any = acquireScript.Hash()
	acquireSrcArg any = acquireSrc
)

// acquireCall is one acquisition's EVALSHA command, allocated once per call
// with the numbers and lease id its arguments point to: go-redis writes
// *int64, *string and encoding.BinaryMarshaler arguments without boxing
// copies, and the keys and dimension names come pre-boxed from dimKeys, so
// an acquisition costs one allocation here instead of one per argument.
type acquireCall struct {
	now, ttl, poll int64
	queue          int64
	id             idText
	args           []any
	opKey          string
	inline         [3 + 2*acquireInline + acquireArgs + 2*acquireInline + acquireOpArgs]any
	cmd            *redis.IntSliceCmd

	// Set when the call goes through the batcher.
	ctx  context.Context
	done chan error // capacity 1: the mapped error, nil when cmd holds the reply
}

func newAcquireCall(n int) *acquireCall {
	c := &acquireCall{}
	if m := 3 + 4*n + acquireArgs + acquireOpArgs; m <= len(c.inline) {
		c.args = c.inline[:m]
	} else {
		c.args = make([]any, m)
	}
	c.args[0], c.args[1], c.args[2] = "evalsha", acquireSHAArg, 2*n
	return c
}

// newCmd makes c's command from its arguments.
func (c *acquireCall) newCmd(ctx context.Context) {
	c.cmd = redis.NewIntSliceCmd(ctx, c.args...)
	c.cmd.SetFirstKeyPos(3)
}

// toEval turns c's command into an EVAL of the script's source, for a
// server that answered NOSCRIPT.
func (c *acquireCall) toEval(ctx context.Context) {
	c.args[0], c.args[1] = "eval", acquireSrcArg
	c.newCmd(ctx)
}

// run sends the command (EVALSHA, then EVAL when the server has not cached
// the script, as redis.Script.Run does) and returns the integer reply,
// bounded by ctx (see bounded; honours says whether rdb bounds itself).
func (c *acquireCall) run(ctx context.Context, rdb redis.UniversalClient, honours bool) ([]int64, error) {
	err := bounded(ctx, honours, func() error {
		c.newCmd(ctx)
		err := rdb.Process(ctx, c.cmd)
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			c.toEval(ctx)
			err = rdb.Process(ctx, c.cmd)
		}
		return err
	})
	if err != nil {
		return nil, fail("acquire", err)
	}
	return c.cmd.Val(), nil
}

// idText is a lease id in its canonical text form, written as a bulk string
// argument.
type idText [36]byte

func (t *idText) set(id store.LeaseID) {
	hex.Encode(t[0:8], id[0:4])
	t[8] = '-'
	hex.Encode(t[9:13], id[4:6])
	t[13] = '-'
	hex.Encode(t[14:18], id[6:8])
	t[18] = '-'
	hex.Encode(t[19:23], id[8:10])
	t[23] = '-'
	hex.Encode(t[24:], id[10:])
}

// MarshalBinary implements encoding.BinaryMarshaler for go-redis.
func (t *idText) MarshalBinary() ([]byte, error) { return t[:], nil }

// intReply reads an integer array reply.
type intReply struct {
	v   []int64
	i   int
	err error
}

func (r *intReply) int() int64 {
	if r.i >= len(r.v) {
		if r.err == nil {
			r.err = fmt.Errorf("redisstore: short script reply (%d values)", len(r.v))
		}
		return 0
	}
	r.i++
	return r.v[r.i-1]
}

func (r *intReply) more() bool { return r.i < len(r.v) }
