package service

import (
	"context"
	"errors"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/service/auth"
	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
)

// api implements sluicev1connect.LimiterServiceHandler.
type api struct{ s *Server }

func (a *api) Acquire(ctx context.Context, req *connect.Request[sluicev1.AcquireRequest]) (*connect.Response[sluicev1.AcquireResponse], error) {
	m := req.Msg
	if err := a.mayAcquire(ctx, m.GetIdempotencyKey(), m.GetItems()); err != nil {
		return nil, err
	}
	out, err := dedupe(ctx, a.s, "acquire", m.GetCaller(), m.GetIdempotencyKey(), m, func() (*sluicev1.AcquireResponse, error) {
		return a.acquire(ctx, m)
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

func (a *api) acquire(ctx context.Context, m *sluicev1.AcquireRequest) (*sluicev1.AcquireResponse, error) {
	reqs, opts, err := a.begin(ctx, m.GetItems(), m.GetTtl(), m.GetCaller())
	if err != nil {
		return nil, err
	}
	res, err := a.s.c.AcquireMany(ctx, reqs, opts...)
	if err != nil {
		return nil, toConnect(err)
	}
	out := &sluicev1.AcquireResponse{Granted: res.Granted(), Degraded: res.Degraded, Dimensions: dimensionResults(res.Dimensions)}
	if !res.Granted() {
		out.RetryIn = durationpb.New(res.RetryIn)
		return out, nil
	}
	if ctx.Err() != nil {
		// The caller went away as the grant came: nobody will release it.
		_ = res.Lease.Release(context.WithoutCancel(ctx))
		return nil, toConnect(ctx.Err())
	}
	if out.Lease, err = a.hold(ctx, res.Lease); err != nil {
		return nil, err
	}
	return out, nil
}

func (a *api) Wait(ctx context.Context, req *connect.Request[sluicev1.WaitRequest]) (*connect.Response[sluicev1.WaitResponse], error) {
	m := req.Msg
	if err := a.mayAcquire(ctx, m.GetIdempotencyKey(), m.GetItems()); err != nil {
		return nil, err
	}
	out, err := dedupe(ctx, a.s, "wait", m.GetCaller(), m.GetIdempotencyKey(), m, func() (*sluicev1.WaitResponse, error) {
		return a.wait(ctx, m)
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

func (a *api) wait(ctx context.Context, m *sluicev1.WaitRequest) (*sluicev1.WaitResponse, error) {
	reqs, opts, err := a.begin(ctx, m.GetItems(), m.GetTtl(), m.GetCaller())
	if err != nil {
		return nil, err
	}
	wctx, cancel, err := a.waitBound(ctx, m.GetMaxWait())
	if err != nil {
		return nil, err
	}
	defer cancel()
	l, err := a.s.c.Wait(wctx, reqs, opts...)
	var te *sluice.SlotTimeoutError
	if errors.As(err, &te) && ctx.Err() == nil {
		return &sluicev1.WaitResponse{RetryIn: durationpb.New(te.RetryIn)}, nil
	}
	if err != nil {
		return nil, toConnect(err)
	}
	if ctx.Err() != nil {
		// The caller went away as the slot came: nobody will release it.
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, toConnect(ctx.Err())
	}
	lease, err := a.hold(ctx, l)
	if err != nil {
		return nil, err
	}
	return &sluicev1.WaitResponse{Granted: true, Lease: lease, Degraded: l.Degraded()}, nil
}

// waitBound returns the context a server-side wait runs under: the call's
// deadline less the margin the answer needs, and at most maxWait.
func (a *api) waitBound(ctx context.Context, maxWait *durationpb.Duration) (context.Context, context.CancelFunc, error) {
	var bound time.Time
	if dl, ok := ctx.Deadline(); ok {
		bound = dl.Add(-a.s.waitMargin)
	}
	if maxWait != nil {
		if err := maxWait.CheckValid(); err != nil || maxWait.AsDuration() <= 0 {
			return nil, nil, invalidArg("max_wait", maxWait.AsDuration(), "must be a positive duration")
		}
		if b := time.Now().Add(maxWait.AsDuration()); bound.IsZero() || b.Before(bound) {
			bound = b
		}
	}
	if bound.IsZero() {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, cancel, nil
	}
	ctx, cancel := context.WithDeadline(ctx, bound)
	return ctx, cancel, nil
}

// resolveCosts replaces a zero cost with the bucket's cost per call: the
// library takes explicit costs only. A dimension's cost per call is read
// from the store once and kept for costTTL (a store round trip per call
// otherwise). When the store cannot be reached and the Client fails open,
// a cost never read counts as 1, so that the acquisition is granted
// degraded as the failure policy says, not refused.
func (a *api) resolveCosts(ctx context.Context, reqs []sluice.Request) error {
	now := time.Now()
	var dims []string
	for i := range reqs {
		if reqs[i].Cost != 0 {
			continue
		}
		if cost, ok := a.s.costs.get(reqs[i].Dimension, now); ok {
			reqs[i].Cost = cost
			continue
		}
		dims = append(dims, reqs[i].Dimension)
	}
	if len(dims) == 0 {
		return nil
	}
	states, err := a.s.c.Peek(ctx, dims...)
	if err != nil {
		if !errors.Is(err, sluice.ErrUnavailable) || a.s.c.Config().FailurePolicy != sluice.FailOpen {
			return toConnect(err)
		}
	}
	per := make(map[string]int64, len(states))
	for _, st := range states {
		per[st.Name] = max(st.CostPerCall, 1)
		a.s.costs.put(st.Name, per[st.Name], now)
	}
	for i := range reqs {
		if reqs[i].Cost == 0 {
			reqs[i].Cost = max(per[reqs[i].Dimension], 1)
		}
	}
	return nil
}

// costTTL is how long a dimension's cost per call is kept.
const costTTL = 10 * time.Second

// costCache keeps dimensions' costs per call for costTTL. It holds at most
// maxCosts dimensions, and forgets them all when full.
type costCache struct {
	mu sync.Mutex
	by map[string]costEntry
}

type costEntry struct {
	cost int64
	at   time.Time
}

const maxCosts = 10_000

func (c *costCache) get(dim string, now time.Time) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.by[dim]
	if !ok || now.Sub(e.at) > costTTL {
		return 0, false
	}
	return e.cost, true
}

func (c *costCache) put(dim string, cost int64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil || len(c.by) >= maxCosts {
		c.by = make(map[string]costEntry)
	}
	c.by[dim] = costEntry{cost, now}
}

// hold registers a granted lease and returns its message; when the server
// holds too many, it releases the lease and fails.
func (a *api) hold(ctx context.Context, l *sluice.Lease) (*sluicev1.Lease, error) {
	h := a.s.leases.put(l, owner(ctx), time.Now())
	if h == "" {
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, connect.NewError(connect.CodeResourceExhausted, errors.New("service: the server holds its maximum of leases; release some, or raise --max-leases"))
	}
	return leaseMessage(h, l), nil
}

func (a *api) Settle(ctx context.Context, req *connect.Request[sluicev1.SettleRequest]) (*connect.Response[sluicev1.SettleResponse], error) {
	m := req.Msg
	l, err := a.lease(ctx, m.GetLeaseId())
	if err != nil {
		return nil, err
	}
	if m.GetDimension() == "" {
		return nil, invalidArg("dimension", "", "names one of the lease's requests or tokens dimensions")
	}
	if err := auth.Check(ctx, auth.Settle, m.GetDimension()); err != nil {
		return nil, err
	}
	var st sluice.Settlement
	switch v := m.GetAmount().(type) {
	case *sluicev1.SettleRequest_Actual:
		if v.Actual < 0 {
			return nil, invalidArg("actual", v.Actual, "must be at least 0")
		}
		st, err = l.Settle(ctx, m.GetDimension(), v.Actual)
	case *sluicev1.SettleRequest_Delta:
		st, err = l.Adjust(ctx, m.GetDimension(), v.Delta)
	default:
		return nil, invalidArg("amount", "", "set actual or delta")
	}
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&sluicev1.SettleResponse{Held: st.Held, AppliedMilli: int64(st.Applied), RemainingMilli: int64(st.Remaining)}), nil
}

func (a *api) Release(ctx context.Context, req *connect.Request[sluicev1.ReleaseRequest]) (*connect.Response[sluicev1.ReleaseResponse], error) {
	h := req.Msg.GetLeaseId()
	if h == "" {
		return nil, invalidArg("lease_id", "", "is required")
	}
	if err := auth.Check(ctx, auth.Acquire); err != nil {
		return nil, err
	}
	l, ok := a.s.leases.take(h, owner(ctx))
	if !ok {
		return connect.NewResponse(&sluicev1.ReleaseResponse{}), nil
	}
	err := l.Release(ctx)
	switch {
	case err == nil:
		return connect.NewResponse(&sluicev1.ReleaseResponse{Released: true}), nil
	case errors.Is(err, sluice.ErrLeaseReleased), errors.Is(err, sluice.ErrLeaseExpired), errors.Is(err, sluice.ErrUnknownLease):
		return connect.NewResponse(&sluicev1.ReleaseResponse{}), nil
	}
	// The store did not answer: keep the lease, so that a retry releases it.
	a.s.leases.restore(h, l)
	return nil, toConnect(err)
}

func (a *api) Heartbeat(ctx context.Context, req *connect.Request[sluicev1.HeartbeatRequest]) (*connect.Response[sluicev1.HeartbeatResponse], error) {
	m := req.Msg
	if err := auth.Check(ctx, auth.Acquire); err != nil {
		return nil, err
	}
	if n := len(m.GetLeaseIds()); n == 0 || n > maxHeartbeat {
		return nil, invalidArg("lease_ids", n, "names 1 to 1000 leases")
	}
	var ttl time.Duration
	if d := m.GetTtl(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() <= 0 {
			return nil, invalidArg("ttl", d.AsDuration(), "must be a positive duration")
		}
		ttl = d.AsDuration()
	}
	out := &sluicev1.HeartbeatResponse{Results: make([]*sluicev1.HeartbeatResult, len(m.GetLeaseIds()))}
	for i, h := range m.GetLeaseIds() {
		out.Results[i] = a.heartbeat(ctx, h, ttl)
	}
	return connect.NewResponse(out), nil
}

func (a *api) heartbeat(ctx context.Context, h string, ttl time.Duration) *sluicev1.HeartbeatResult {
	r := &sluicev1.HeartbeatResult{LeaseId: h}
	l, ok := a.s.leases.get(h)
	if !ok || l.owner != owner(ctx) {
		r.Error = "unknown"
		return r
	}
	if ttl == 0 {
		ttl = l.TTL()
	}
	err := l.Extend(ctx, ttl)
	switch {
	case err == nil:
		r.ExpiresAt = timestamp(l.ExpiresAt())
	case errors.Is(err, sluice.ErrLeaseExpired):
		r.Error = "expired"
	case errors.Is(err, sluice.ErrLeaseReleased):
		r.Error = "released"
	case errors.Is(err, sluice.ErrUnknownLease):
		r.Error = "unknown"
	case errors.Is(err, sluice.ErrInvalid):
		r.Error = "invalid: " + err.Error()
	default:
		r.Error = "unavailable"
	}
	return r
}

func (a *api) Peek(ctx context.Context, req *connect.Request[sluicev1.PeekRequest]) (*connect.Response[sluicev1.PeekResponse], error) {
	dims := req.Msg.GetDimensions()
	if err := auth.Check(ctx, auth.Read, dims...); err != nil {
		return nil, err
	}
	var states []sluice.BucketState
	var err error
	if len(dims) == 0 {
		states, err = a.s.c.Buckets(ctx)
	} else {
		states, err = a.s.c.Peek(ctx, dims...)
	}
	if err != nil {
		return nil, toConnect(err)
	}
	p := auth.FromContext(ctx)
	out := &sluicev1.PeekResponse{}
	for _, st := range states {
		if p == nil || p.Matches(st.Name) {
			out.Buckets = append(out.Buckets, bucketState(st))
		}
	}
	return connect.NewResponse(out), nil
}

// lease finds a lease the caller holds by handle.
func (a *api) lease(ctx context.Context, h string) (*sluice.Lease, error) {
	if h == "" {
		return nil, invalidArg("lease_id", "", "is required")
	}
	if l, ok := a.s.leases.get(h); ok && l.owner == owner(ctx) {
		return l.Lease, nil
	}
	return nil, connect.NewError(connect.CodeNotFound, errNotHeld(h))
}

// begin checks an acquisition before it goes to the store: the server
// is not shutting down, the caller may acquire its items, and its TTL and
// caller are valid. It returns the requests, zero costs resolved, and the
// options.
func (a *api) begin(ctx context.Context, items []*sluicev1.Item, ttl *durationpb.Duration, caller string) ([]sluice.Request, []sluice.AcquireOption, error) {
	if a.s.isClosed() {
		return nil, nil, errClosing
	}
	reqs, err := a.authorized(ctx, items)
	if err != nil {
		return nil, nil, err
	}
	opts, err := acquireOptions(ttl, callerOf(ctx, caller))
	if err != nil {
		return nil, nil, err
	}
	return reqs, opts, nil
}

// mayAcquire checks, for a call with an idempotency key, that the caller
// may acquire items before an earlier answer under the key is looked up
// (the call itself checks again, as any).
func (a *api) mayAcquire(ctx context.Context, key string, items []*sluicev1.Item) error {
	if key == "" || auth.FromContext(ctx) == nil {
		return nil
	}
	_, err := mayAcquireItems(ctx, items)
	return err
}

// mayAcquireItems converts a request's items and checks that the caller
// may acquire them.
func mayAcquireItems(ctx context.Context, items []*sluicev1.Item) ([]sluice.Request, error) {
	reqs, err := requests(items)
	if err != nil {
		return nil, err
	}
	dims := make([]string, len(reqs))
	for i, r := range reqs {
		dims[i] = r.Dimension
	}
	return reqs, auth.Check(ctx, auth.Acquire, dims...)
}

// authorized converts a request's items, checks that the caller may
// acquire them, and resolves zero costs.
func (a *api) authorized(ctx context.Context, items []*sluicev1.Item) ([]sluice.Request, error) {
	reqs, err := mayAcquireItems(ctx, items)
	if err != nil {
		return nil, err
	}
	if err := a.resolveCosts(ctx, reqs); err != nil {
		return nil, err
	}
	return reqs, nil
}

// owner is the name of the request's principal, "" without
// authentication.
func owner(ctx context.Context) string {
	if p := auth.FromContext(ctx); p != nil {
		return p.Name
	}
	return ""
}

// callerOf is the caller a lease records: the one the request names, else
// its principal's name.
func callerOf(ctx context.Context, caller string) string {
	if caller == "" {
		return owner(ctx)
	}
	return caller
}
