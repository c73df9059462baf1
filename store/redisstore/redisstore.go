// Package redisstore is Sluice's Redis store: buckets and leases in Redis
// (standalone, Sentinel or Cluster) through go-redis v9, for a fleet of
// processes sharing vendor limits with one round trip per acquisition.
//
// Every operation is one atomic Lua script, run with EVALSHA and falling
// back to EVAL when the server has not cached it (after a restart or SCRIPT
// FLUSH). The scripts hold only integers: millitokens and milliseconds below
// 2^53, which Lua's doubles represent exactly; the products the bucket math
// needs (elapsed×amount, which can reach 2^103) are computed exactly with
// 24-bit limbs, and a differential test proves the Lua agrees with package
// bucket on random and extreme inputs.
//
// # Clock
//
// By default the scripts read the server's TIME, so the whole fleet shares
// one clock and the Now fields of requests are ignored (not even
// validated). WithCallerClock uses each request's Now instead; tests and
// golden vectors need it, and so do managed Redis offerings that reject TIME
// in scripts.
//
// # Keys
//
// A dimension "vendor#metric" lives in the hash prefix{vendor}#metric, e.g.
// "sluice:{openai}#rpm": the hash tag makes every dimension of one vendor
// share a Cluster slot, so one script can touch them all. Per vendor there
// are also prefix{vendor}:buckets (the vendor's bucket names),
// prefix{vendor}:leases (its lease records, a sorted set scored by expiry),
// prefix{vendor}:dz#metric (each dimension's leases, scored by expiry),
// the waiter queue of a concurrent dimension as two sorted sets of lease ids,
// prefix{vendor}:q#metric scored by place and prefix{vendor}:qx#metric
// scored by expiry, and one hash prefix{vendor}:lease:<uuid> per lease
// record, in the vendor of the lease's first item. The set prefix+"vendors" registers every vendor, so
// that ListBuckets, Leases and Reconcile never SCAN the keyspace. On a
// standalone server with one tag per vendor, the hash prefix+"ids" maps
// each live lease id to its record's vendor (so that a reused id is found
// under any vendor), and a vendor left without buckets and lease records
// leaves the registry in the script that removed the last one.
//
// # Timeouts
//
// Every operation is bounded by the caller's deadline, or, for a context
// without one, by WithTimeout (DefaultTimeout), as the store contract
// says, whatever options the client was built with; build it with
// ContextTimeoutEnabled for the fast path.
//
// On a Cluster client an acquisition whose dimensions hash to different
// slots fails with ErrCrossSlot before any script runs. Name dimensions
// "vendor#metric" with the same vendor for everything one call acquires
// together (openai#rpm + openai#tpm), and it cannot happen.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/store"
)

// ErrCrossSlot reports an acquisition whose dimensions would live in
// different Redis Cluster slots, which no single script can touch. It
// matches store.ErrInvalid.
var ErrCrossSlot = fmt.Errorf("%w: redisstore: the dimensions of one acquisition must share a Redis Cluster slot (name them vendor#metric with one vendor)", store.ErrInvalid)

// DefaultPrefix starts every key the store writes.
const DefaultPrefix = "sluice:"

// Store is the Redis store. It is safe for concurrent use.
type Store struct {
	rdb         redis.UniversalClient
	prefix      string
	callerClock bool
	timeout     time.Duration
	honours     bool // the client bounds commands by their context (honoursContext)
	slotCheck   bool
	tag         string // WithHashTag; "" means one tag per vendor
	keyspace    string // prefix + "\n" + tag + "\n" + ids, the scripts' key space argument
	ids         string // the hash of live lease ids (keys.lua), "" when the layout keeps none
	idsArg      any    // ids, boxed once
	maxSkew     time.Duration
	skewMs      int64         // maxSkew in ms, the scripts' argument
	opWindow    time.Duration // WithOpWindow
	opWindowMs  int64         // opWindow in ms, the scripts' argument (op.lua)
	closed      atomic.Bool
	leasePage   int           // index entries per leases script call; 0 means leasePage (tests set it)
	ackReplicas int           // WithReplicaAck; 0 sends no WAIT
	ackTimeout  time.Duration // WithReplicaAck
	maxBatch    int           // WithBatching; < 2 means no batching
	batch       *batcher      // nil without batching

	keysMu sync.RWMutex
	keys   map[string]*dimKeys // dimension → its keys (bounded cache)

	tagsMu sync.Mutex
	tags   map[store.LeaseID]string // lease → vendor of its record (bounded cache)
}

// dimKeys are a dimension's keys.
type dimKeys struct {
	vendor string
	tag    string // prefix{vendor}
	bucket string // prefix{vendor}#rest
	index  string // prefix{vendor}:dz#rest
	queue  string // prefix{vendor}:q#rest, the waiter queue by place
	qexp   string // prefix{vendor}:qx#rest, the waiter queue by expiry
	slot   uint16

	// The same, boxed once for go-redis's arguments: the bucket and index
	// keys, the dimension name and the tag.
	bucketArg, indexArg, nameArg, tagArg any
}

const maxCached = 1 << 16

// Option configures a Store.
type Option func(*Store)

// WithPrefix sets the key prefix (default DefaultPrefix), for sharing a
// Redis with other applications or environments. It must not contain
// braces.
func WithPrefix(p string) Option { return func(s *Store) { s.prefix = p } }

// WithCallerClock makes the store decide at each request's Now instead of
// the Redis server's TIME.
func WithCallerClock() Option { return func(s *Store) { s.callerClock = true } }

// WithTimeout bounds every operation whose context carries no deadline,
// including its retries inside go-redis (default DefaultTimeout); a
// deadline the caller set (sluice.Client sets one from Config.OpTimeout)
// bounds the operation instead, shorter or longer. An operation that has
// no answer in time, or whose caller's context ends first, fails with
// store.ErrUnavailable, whatever timeouts the client was built with. A
// timed-out write may still have been applied by the server (its reply was
// lost). Zero leaves operations bounded by the caller's context only.
//
// A client built with ContextTimeoutEnabled bounds its own commands by the
// deadline; with any other client go-redis waits for its own dial, read
// and write timeouts whatever the context says, so the store waits for
// each command on a goroutine it abandons when the context ends, which
// costs that goroutine per operation and leaves the abandoned command to
// the client's own timeouts.
func WithTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// WithOpWindow sets how long a script keeps its reply to an operation that
// must not be applied twice (default store.OpWindow, one minute, or twice
// the timeout if that is longer): go-redis
// sends a command again after a broken connection or a read timeout
// (MaxRetries, default 3), and the resend finds the reply and returns it
// instead of applying the operation a second time. go-redis resends only
// while the call lasts, so d must exceed the store's timeout (WithTimeout)
// and the longest deadline callers give. Each kept
// reply costs about 120–150 bytes of server memory for d: at 10,000
// acquisitions without a lease record per second, a one-minute window
// keeps about 90 MB, a ten-second one 15 MB.
func WithOpWindow(d time.Duration) Option { return func(s *Store) { s.opWindow = d } }

// WithMaxSkew sets the largest disagreement between the clocks of the
// store's callers that it tolerates (default store.DefaultMaxSkew, at most
// store.MaxMaxSkew): a caller behind a bucket's refill timestamp by at
// most d decides at that timestamp; one further behind is refused
// admission until its clock is within d, and its other operations apply
// at the timestamp, which never moves backwards (bucket.Align). It
// matters with WithCallerClock; on the
// server clock every script reads one clock.
func WithMaxSkew(d time.Duration) Option { return func(s *Store) { s.maxSkew = d } }

// WithSlotCheck forces the cross-slot check on or off. By default it is on
// exactly when the client is a *redis.ClusterClient; turning it on for a
// standalone server makes a test environment reject what a Cluster would.
func WithSlotCheck(on bool) Option { return func(s *Store) { s.slotCheck = on } }

// WithHashTag puts every key in the one Cluster slot of tag instead of one
// slot per vendor: acquisitions may then mix vendors freely on a Cluster, at
// the price of one shard holding all of Sluice's keys. The tag must be
// non-empty and contain no braces.
func WithHashTag(tag string) Option { return func(s *Store) { s.tag = tag } }

// WithBatching sets how concurrent acquisitions are auto-pipelined. By
// default (DefaultMaxBatch) when several goroutines acquire through one
// Store at once, their script calls go to the server as pipelines of at
// most maxBatch commands (one write, one read) instead of one round trip
// each. Each acquisition is still exactly one command; there is no
// artificial wait, and an acquisition that finds no other in progress is
// sent at once by its caller, exactly as without batching, so serial latency
// is unchanged. maxBatch 0 means DefaultMaxBatch; 1 turns batching off.
//
// With batching, two dispatcher goroutines start on the first contended
// acquisition and Close stops them: close the Store. A batched command runs
// under the latest deadline of the acquisitions in its pipeline, without
// their contexts' values, so go-redis hooks (tracing) see a pipeline and
// not the caller's context; a caller whose context ends returns at once,
// and its command is not sent unless it already was. On a ClusterClient
// go-redis splits each pipeline by node.
func WithBatching(maxBatch int) Option {
	return func(s *Store) {
		if maxBatch == 0 {
			maxBatch = DefaultMaxBatch
		}
		s.maxBatch = maxBatch
	}
}

// New returns a store over rdb. The store does not own rdb: Close leaves it
// open.
func New(rdb redis.UniversalClient, opts ...Option) (*Store, error) {
	_, cluster := rdb.(*redis.ClusterClient)
	s := &Store{rdb: rdb, prefix: DefaultPrefix, slotCheck: cluster, maxBatch: DefaultMaxBatch,
		timeout: DefaultTimeout, honours: honoursContext(rdb), maxSkew: store.DefaultMaxSkew,
		keys: map[string]*dimKeys{}, tags: map[store.LeaseID]string{}}
	for _, o := range opts {
		o(s)
	}
	if strings.ContainsAny(s.prefix, "{}\n") {
		return nil, fmt.Errorf("%w: redisstore: prefix %q must not contain braces or newlines", store.ErrInvalid, s.prefix)
	}
	if s.tag != "" && strings.ContainsAny(s.tag, "{}\n") {
		return nil, fmt.Errorf("%w: redisstore: hash tag %q must not contain braces or newlines", store.ErrInvalid, s.tag)
	}
	if err := store.ValidateMaxSkew(s.maxSkew); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	s.skewMs = s.maxSkew.Milliseconds()
	if s.opWindow == 0 {
		s.opWindow = max(store.OpWindow, 2*s.timeout)
	} else if s.opWindow < time.Second || s.timeout > 0 && s.opWindow <= s.timeout {
		return nil, fmt.Errorf("%w: redisstore: op window %s must be at least 1s and longer than the timeout (%s): a command is sent again only while its call lasts",
			store.ErrInvalid, s.opWindow, s.timeout)
	}
	s.opWindowMs = s.opWindow.Milliseconds()
	if !cluster && s.tag == "" {
		// Lease records live in their vendor's slot; on a standalone server
		// a script may read any key, so one hash maps every live lease id to
		// its vendor and an acquisition finds a reused id under any vendor.
		s.ids = s.prefix + "ids"
	}
	s.idsArg = s.ids
	s.keyspace = s.prefix + "\n" + s.tag + "\n" + s.ids
	if s.timeout < 0 {
		return nil, fmt.Errorf("%w: redisstore: timeout %s must not be negative", store.ErrInvalid, s.timeout)
	}
	if s.maxBatch < 0 {
		return nil, fmt.Errorf("%w: redisstore: negative batch size %d", store.ErrInvalid, s.maxBatch)
	}
	if err := s.validateReplicaAck(); err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	if s.maxBatch > 1 && s.ackReplicas == 0 {
		s.batch = newBatcher(rdb, s.maxBatch, s.honours)
	}
	return s, nil
}

// Store implements the whole contract, its optional operations included.
var (
	_ store.Queuer = (*Store)(nil)
	_ store.Cooler = (*Store)(nil)
	_ store.Syncer = (*Store)(nil)
)

// Close marks the store closed and stops the batching dispatcher once it
// has answered the acquisitions already queued; it does not close the
// client.
func (s *Store) Close() error {
	s.closed.Store(true)
	if s.batch != nil {
		s.batch.close()
	}
	return nil
}

// begin checks the store is open and bounds a context without a deadline
// by the store's timeout (store.WithDefaultTimeout).
func (s *Store) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return ctx, nil, store.ErrClosed
	}
	ctx, cancel := store.WithDefaultTimeout(ctx, s.timeout)
	return ctx, cancel, nil
}

func done(cancel context.CancelFunc) {
	if cancel != nil {
		cancel()
	}
}

// now returns the ARGV clock for t: t in Unix ms with the caller clock,
// else -1 (the script reads TIME).
func (s *Store) now(t time.Time) int64 {
	if !s.callerClock {
		return -1
	}
	return t.UnixMilli()
}

// splitDim splits "vendor#rest" at the first '#' (or returns the
// WithHashTag tag and "#"+dim). An empty vendor ("#rpm")
// becomes "#", which no real vendor can be, because Redis ignores an empty
// hash tag.
func (s *Store) splitDim(dim string) (vendor, rest string) {
	if s.tag != "" {
		return s.tag, "#" + dim
	}
	vendor, rest = dim, ""
	if i := strings.IndexByte(dim, '#'); i >= 0 {
		vendor, rest = dim[:i], dim[i:]
	}
	if vendor == "" {
		vendor = "#"
	}
	return vendor, rest
}

// sameSlot checks, when the store checks slots (WithSlotCheck), that the
// dimension named dim, whose keys are k, lives in the slot of the
// request's first dimension, first: otherwise the error matches
// ErrCrossSlot, before any script runs.
func (s *Store) sameSlot(firstName string, first *dimKeys, dim string, k *dimKeys) error {
	if s.slotCheck && k.slot != first.slot {
		return fmt.Errorf("%w: %q (slot %d) and %q (slot %d)", ErrCrossSlot, firstName, first.slot, dim, k.slot)
	}
	return nil
}

// dim returns the keys of a dimension whose name is valid.
func (s *Store) dim(name string) *dimKeys {
	s.keysMu.RLock()
	k := s.keys[name]
	s.keysMu.RUnlock()
	if k != nil {
		return k
	}
	v, rest := s.splitDim(name)
	tag := s.prefix + "{" + v + "}"
	k = &dimKeys{vendor: v, tag: tag, bucket: tag + rest, index: tag + ":dz" + rest,
		queue: tag + ":q" + rest, qexp: tag + ":qx" + rest, slot: Slot(v)}
	k.bucketArg, k.indexArg, k.nameArg, k.tagArg = k.bucket, k.index, name, k.tag
	s.keysMu.Lock()
	if len(s.keys) >= maxCached {
		clear(s.keys)
	}
	s.keys[name] = k
	s.keysMu.Unlock()
	return k
}

func (s *Store) vendorTag(v string) string { return s.prefix + "{" + v + "}" }

// opKey names the key under which a script keeps its reply to operation
// id of kind for store.OpWindow (see op.lua), in the slot of tag, the
// vendor's key tag. A zero id, which a caller that does not resend may
// pass, gets a fresh one: go-redis's own resends repeat the command's
// arguments, this key included.
func opKey(tag, kind string, id store.LeaseID) string {
	if id.IsZero() {
		id = store.NewLeaseID()
	}
	var t idText
	t.set(id)
	return tag + ":op:" + kind + ":" + string(t[:]) // one allocation

}

func (s *Store) leaseIndex(v string) string { return s.vendorTag(v) + ":leases" }
func (s *Store) bucketSet(v string) string  { return s.vendorTag(v) + ":buckets" }
func (s *Store) registry() string           { return s.prefix + "vendors" }

// leaseKeys are the KEYS of a script on one lease record: the record of
// lease id under vendor v, and v's lease index.
func (s *Store) leaseKeys(v, id string) []string {
	return []string{s.vendorTag(v) + ":lease:" + id, s.leaseIndex(v)}
}

// rememberLease caches the vendor holding a lease record.
func (s *Store) rememberLease(id store.LeaseID, vendor string) {
	s.tagsMu.Lock()
	if len(s.tags) >= maxCached {
		clear(s.tags)
	}
	s.tags[id] = vendor
	s.tagsMu.Unlock()
}

func (s *Store) leaseVendor(id store.LeaseID) (string, bool) {
	s.tagsMu.Lock()
	v, ok := s.tags[id]
	s.tagsMu.Unlock()
	return v, ok
}

func (s *Store) forgetLease(id store.LeaseID) {
	s.tagsMu.Lock()
	delete(s.tags, id)
	s.tagsMu.Unlock()
}

// vendors returns the registered vendors, sorted.
func (s *Store) vendors(ctx context.Context) ([]string, error) {
	var vs []string
	err := bounded(ctx, s.honours, func() (err error) {
		vs, err = s.rdb.SMembers(ctx, s.registry()).Result()
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(vs)
	return vs, nil
}

// fail maps a go-redis error to the store's errors: anything that is not a
// script or usage error from the server is store.ErrUnavailable, and so
// are the server's refusals to work at all: out of memory under noeviction
// (OOM), writes stopped after a failed save (MISCONF), and the states of a
// server loading, failing over or busy.
func fail(op string, err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		for _, p := range []string{"LOADING", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "READONLY", "BUSY", "NOREPLICAS", "MOVED", "ASK", "OOM", "MISCONF"} {
			if redis.HasErrorPrefix(err, p) {
				return store.Unavailable("redisstore: "+op, err)
			}
		}
		// Redis 6 wraps an error raised inside a script:
		// "ERR Error running script ...: -OOM command not allowed ...".
		if msg := err.Error(); strings.Contains(msg, "-OOM ") || strings.Contains(msg, "-MISCONF ") {
			return store.Unavailable("redisstore: "+op, err)
		}
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return store.Unavailable("redisstore: "+op, err)
}

// Slot returns the Redis Cluster hash slot of a key whose hash tag is tag
// (CRC16/XMODEM of the tag, modulo 16384), as Redis computes it.
func Slot(tag string) uint16 {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
