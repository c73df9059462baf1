package benchrun

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// Counters are live totals for progress, and the store calls of the
// workers when the client's store is wrapped with Wrap. Safe for
// concurrent use.
type Counters struct {
	Granted, Denied, Errors atomic.Int64
	// Calls counts the store calls made through Wrap: acquire, reserve,
	// cancel, dequeue, release and extend.
	Calls atomic.Int64

	mu  sync.Mutex
	lat []int64 // µs of every acquire and reserve call
}

// classKey carries a class's call counter (*atomic.Int64) in a worker's
// context, down to the wrapped store.
type classKey struct{}

// Wrap returns st counting its calls, denials and decision latencies into
// k (and into the class counter a worker's context carries).
func (k *Counters) Wrap(st store.Store) store.Store {
	return &metered{Forward: contract.Forward{Store: st}, k: k}
}

// latencies returns the latencies recorded so far.
func (k *Counters) latencies() []int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]int64(nil), k.lat...)
}

type metered struct {
	contract.Forward
	k *Counters
}

func (m *metered) count(ctx context.Context) {
	m.k.Calls.Add(1)
	if n, ok := ctx.Value(classKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
}

func (m *metered) decided(start time.Time, granted bool, err error) {
	us := time.Since(start).Microseconds()
	m.k.mu.Lock()
	m.k.lat = append(m.k.lat, us)
	m.k.mu.Unlock()
	if err == nil && !granted {
		m.k.Denied.Add(1)
	}
}

func (m *metered) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	m.count(ctx)
	start := time.Now()
	err := m.Store.Acquire(ctx, req, res)
	m.decided(start, res.Granted, err)
	return err
}

func (m *metered) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	m.count(ctx)
	start := time.Now()
	err := m.Forward.Reserve(ctx, req, res)
	m.decided(start, res.Granted, err)
	return err
}

func (m *metered) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	m.count(ctx)
	return m.Forward.Cancel(ctx, req)
}

func (m *metered) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	m.count(ctx)
	return m.Forward.Dequeue(ctx, req)
}

func (m *metered) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	m.count(ctx)
	return m.Store.Release(ctx, req)
}

func (m *metered) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	m.count(ctx)
	return m.Store.Extend(ctx, req)
}
