package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// WithReplicaAck makes every write wait until n replicas acknowledged it,
// at most timeout: the store sends WAIT n timeout in the same pipeline as
// the write's script (WAIT cannot run inside a script), one round trip, and
// reports store.ErrUnavailable when fewer replicas acknowledged in time.
// The write may then have been applied on the master all the same, as with
// any timeout; a grant the caller was told about is on n replicas, so a
// failover to one of them loses no acknowledged grant (Redis replication
// is otherwise asynchronous: a promoted replica misses the writes its
// master acknowledged last). n 0, the default, sends no WAIT.
//
// It turns batching off (every acquisition waits for its own write), and
// adds the replicas' acknowledgement to every write's latency. On a
// Cluster the pipeline goes to the master of the operation's first key.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(s *Store) { s.ackReplicas, s.ackTimeout = n, timeout }
}

// validateReplicaAck checks WithReplicaAck's values.
func (s *Store) validateReplicaAck() error {
	switch {
	case s.ackReplicas < 0:
		return fmt.Errorf("redisstore: replica ack count %d must not be negative", s.ackReplicas)
	case s.ackReplicas > 0 && s.ackTimeout < time.Millisecond:
		return fmt.Errorf("redisstore: replica ack timeout %s must be at least 1ms", s.ackTimeout)
	}
	return nil
}

// errNotAcked reports a write fewer replicas acknowledged than asked.
type errNotAcked struct {
	got, want int64
	timeout   time.Duration
}

func (e errNotAcked) Error() string {
	return fmt.Sprintf("%d of %d replicas acknowledged the write within %s (it may have been applied)", e.got, e.want, e.timeout)
}

// node returns where a write to key and its WAIT go: the client itself, or
// on a Cluster the master owning key (WAIT counts the writes of its own
// connection, so both must share one).
func (s *Store) node(ctx context.Context, key string) (redis.Cmdable, error) {
	if c, ok := s.rdb.(*redis.ClusterClient); ok {
		return c.MasterForKey(ctx, key)
	}
	return s.rdb, nil
}

// acked sends cmd, a write to key, and WAIT in one pipeline and checks the
// acknowledgement. It returns cmd's own error first (NOSCRIPT included).
func (s *Store) acked(ctx context.Context, key string, cmd redis.Cmder) error {
	return bounded(ctx, s.honours, func() error {
		n, err := s.node(ctx, key)
		if err != nil {
			return err
		}
		pipe := n.Pipeline()
		_ = pipe.Process(ctx, cmd)
		w := redis.NewIntCmd(ctx, "wait", s.ackReplicas, s.ackTimeout.Milliseconds())
		_ = pipe.Process(ctx, w)
		_, _ = pipe.Exec(ctx)
		if err := cmd.Err(); err != nil {
			return err
		}
		if err := w.Err(); err != nil {
			return err
		}
		if got := w.Val(); got < int64(s.ackReplicas) {
			return errNotAcked{got, int64(s.ackReplicas), s.ackTimeout}
		}
		return nil
	})
}

// write runs a script that writes: as run does, or with WithReplicaAck
// pipelined with WAIT (loading the script first when the server answers
// NOSCRIPT).
func (s *Store) write(ctx context.Context, op string, sc *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	if s.ackReplicas == 0 {
		var cmd *redis.Cmd
		err := bounded(ctx, s.honours, func() error {
			cmd = sc.Run(ctx, s.rdb, keys, args...)
			return cmd.Err()
		})
		if err != nil {
			return nil, fail(op, err)
		}
		return cmd, nil
	}
	for loaded := false; ; loaded = true {
		a := make([]any, 0, 3+len(keys)+len(args))
		a = append(a, "evalsha", sc.Hash(), len(keys))
		for _, k := range keys {
			a = append(a, k)
		}
		cmd := redis.NewCmd(ctx, append(a, args...)...)
		err := s.acked(ctx, keys[0], cmd)
		if err != nil && !loaded && redis.HasErrorPrefix(err, "NOSCRIPT") {
			if err := s.load(ctx, keys[0], sc); err != nil {
				return nil, fail(op, err)
			}
			continue
		}
		if err != nil {
			return nil, fail(op, err)
		}
		return cmd, nil
	}
}

// load loads a script on the node of key.
func (s *Store) load(ctx context.Context, key string, sc *redis.Script) error {
	return bounded(ctx, s.honours, func() error {
		n, err := s.node(ctx, key)
		if err != nil {
			return err
		}
		return sc.Load(ctx, n).Err()
	})
}

// runAcked runs an acquisition's command with WithReplicaAck.
func (s *Store) runAcked(ctx context.Context, c *acquireCall, key string) ([]int64, error) {
	c.newCmd(ctx)
	err := s.acked(ctx, key, c.cmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		c.toEval(ctx)
		err = s.acked(ctx, key, c.cmd)
	}
	if err != nil {
		return nil, fail("acquire", err)
	}
	return c.cmd.Val(), nil
}
