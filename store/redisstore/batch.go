package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/store"
)

// DefaultMaxBatch is the largest pipeline WithBatching sends when given 0.
const DefaultMaxBatch = 64

// batcher auto-pipelines concurrent acquisitions (WithBatching). An
// acquisition that finds no other acquisition of the store in progress runs
// its command itself, as without batching. One that finds others in progress
// joins a queue, and a dispatcher goroutine (there are two, started on
// first use, stopped by Close) takes whatever is queued right now, up to
// max, sends it as one pipeline (one write, one read), hands each caller its
// reply and loops. There is no artificial wait: a lone queued request is
// sent at once.
type batcher struct {
	rdb     redis.UniversalClient
	honours bool // the client bounds commands by their context
	max     int
	active  atomic.Int32 // acquisitions in progress through this batcher

	dispatchers int // goroutines sending batches, so one batch's reply can overlap the next's write

	mu      sync.Mutex
	q       []*acquireCall
	closed  bool
	started bool
	wake    chan struct{} // capacity 1: "the queue may be non-empty"
	exited  chan struct{} // closed when every dispatcher has returned
	wg      sync.WaitGroup
}

func newBatcher(rdb redis.UniversalClient, max int, honours bool) *batcher {
	return &batcher{rdb: rdb, honours: honours, max: max, dispatchers: dispatchers, wake: make(chan struct{}, 1), exited: make(chan struct{})}
}

// run sends c's command, alone or in a pipeline with others, and returns
// its reply, with errors mapped as acquireCall.run maps them.
func (b *batcher) run(ctx context.Context, c *acquireCall) ([]int64, error) {
	defer b.active.Add(-1)
	if b.active.Add(1) == 1 {
		return c.run(ctx, b.rdb, b.honours)
	}
	c.ctx, c.done = ctx, make(chan error, 1)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, store.ErrClosed
	}
	if !b.started {
		b.started = true
		b.wg.Add(b.dispatchers)
		for range b.dispatchers {
			go b.loop()
		}
		go func() { b.wg.Wait(); close(b.exited) }()
	}
	b.q = append(b.q, c)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-c.done:
		if err != nil {
			return nil, err
		}
		return c.cmd.Val(), nil
	case <-ctx.Done():
		// The dispatcher skips c if it has not sent it yet; if it has, the
		// script may still run (as when a reply is lost to a timeout) and
		// the reply is dropped: c.done is buffered.
		return nil, fail("acquire", ctx.Err())
	}
}

// close stops the dispatcher once it has served every queued request, and
// waits for it to return.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	started := b.started
	b.mu.Unlock()
	if !started {
		return
	}
	select {
	case b.wake <- struct{}{}:
	default:
	}
	<-b.exited
}

// loop is the dispatcher.
func (b *batcher) loop() {
	defer b.wg.Done()
	var batch []*acquireCall
	for {
		b.mu.Lock()
		n := min(len(b.q), b.max)
		if n == 0 {
			closed := b.closed
			b.mu.Unlock()
			if closed {
				select { // pass the wake-up on to the other dispatchers
				case b.wake <- struct{}{}:
				default:
				}
				return
			}
			<-b.wake
			continue
		}
		batch = append(batch[:0], b.q[:n]...)
		rest := copy(b.q, b.q[n:])
		clear(b.q[rest:])
		b.q = b.q[:rest]
		more := len(b.q) > 0
		b.mu.Unlock()
		if more { // let another dispatcher take the rest
			select {
			case b.wake <- struct{}{}:
			default:
			}
		}
		b.send(batch)
		clear(batch)
	}
}

// send runs one batch: callers whose context is already done are answered
// with its error and not sent; the rest go out as one command (one caller)
// or one pipeline, then the EVAL fallback for those the server answered
// NOSCRIPT, in a second pipeline.
func (b *batcher) send(batch []*acquireCall) {
	live := batch[:0]
	var deadline time.Time
	allDeadlines := true
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.done <- fail("acquire", err)
			continue
		}
		if d, ok := c.ctx.Deadline(); !ok {
			allDeadlines = false
		} else if d.After(deadline) {
			deadline = d
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	// The batch is sent on behalf of several callers, so none's
	// cancellation may cut it short; it gets the latest of their deadlines
	// when they all have one, else only the client's own timeouts.
	ctx := context.Background()
	if allDeadlines {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	if len(live) == 1 {
		c := live[0]
		_, err := c.run(ctx, b.rdb, b.honours)
		c.done <- err
		return
	}
	pipe := b.rdb.Pipeline()
	for _, c := range live {
		c.newCmd(ctx)
		_ = pipe.Process(ctx, c.cmd)
	}
	_, _ = pipe.Exec(ctx)
	var again []*acquireCall
	for _, c := range live {
		if err := c.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			again = append(again, c)
			continue
		}
		c.finish()
	}
	if len(again) == 0 {
		return
	}
	pipe = b.rdb.Pipeline()
	for _, c := range again {
		c.toEval(ctx)
		_ = pipe.Process(ctx, c.cmd)
	}
	_, _ = pipe.Exec(ctx)
	for _, c := range again {
		c.finish()
	}
}

// finish hands c's caller the outcome of its command.
func (c *acquireCall) finish() {
	var err error
	if e := c.cmd.Err(); e != nil {
		err = fail("acquire", e)
	}
	c.done <- err
}

// dispatchers is how many dispatcher goroutines a batcher runs, so that
// one batch can be written while the server is still running another: with
// one, the server idles while the client reads a batch's replies and
// prepares the next, and on a 2-core machine with the server busy (3
// dimensions with a lease) batching measured slower than none; with two,
// about 1.2x faster than none (docs/stores/redis.md, Benchmarks).
const dispatchers = 2
