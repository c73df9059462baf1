// Package remotestore is a store that reaches its buckets through sluice
// serve (its store door, /sluice.store.v1/, which Handler serves), so that a Go process uses the
// service as it would use Redis: the Client in the process decides, waits
// and retries; the store behind the service applies each operation as if
// the process reached it directly. Errors cross the door with their types
// and sentinels; a failure to reach the service is store.ErrUnavailable.
//
// The store has the optional capabilities of the store behind the service
// (store.Queuer, store.Cooler, store.Syncer, store.FreedWatcher,
// store.CallerClock), learnt when it is opened, and store.Usager, which
// answers with an error matching errors.ErrUnsupported when the store
// behind keeps no usage history.
package remotestore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice/store"
)

// Option configures Open.
type Option func(*Store)

// WithHTTPClient sets the HTTP client (default: a client of its own that
// keeps up to 100 idle connections to the service).
func WithHTTPClient(c *http.Client) Option { return func(s *Store) { s.http = c } }

// WithToken sends a bearer token, for a service with authentication (the
// store door needs the admin verb on every dimension).
func WithToken(token string) Option { return func(s *Store) { s.token = token } }

// WithTimeout bounds an operation whose context has no deadline (default
// 2 s).
func WithTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// Store is the core of a remote store; Open returns it, or it with the
// optional capabilities of the store behind the service.
type Store struct {
	base    string
	http    *http.Client
	token   string
	timeout time.Duration
	caps    capabilities
	closed  atomic.Bool
}

// Open connects to the service at baseURL ("http://127.0.0.1:7070") and
// returns its store, with the capabilities of the store behind it.
func Open(ctx context.Context, baseURL string, opts ...Option) (store.Store, error) {
	s := &Store{base: strings.TrimRight(baseURL, "/"), timeout: 2 * time.Second}
	for _, o := range opts {
		o(s)
	}
	if s.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Keep a connection per concurrent caller: with Go's default of 2
		// idle connections per host, most calls of a busy process opened
		// a connection and closed it after the answer.
		t.MaxIdleConnsPerHost = t.MaxIdleConns
		s.http = &http.Client{Transport: t}
	}
	if err := s.do(ctx, http.MethodGet, "Capabilities", nil, &s.caps); err != nil {
		return nil, err
	}
	full := &full{s}
	switch {
	case s.caps.Queuer && s.caps.Cooler && s.caps.Syncer && s.caps.FreedWatcher:
		return &watching{full}, nil
	case s.caps.Queuer && s.caps.Cooler && s.caps.Syncer:
		return full, nil
	}
	return s, nil
}

// CallerClock reports whether the store behind the service decides at the
// request's Now.
func (s *Store) CallerClock() bool { return s.caps.CallerClock }

// Close closes the store's connections; the service and its store stay.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.http.CloseIdleConnections()
	return nil
}

// do sends one operation and decodes its answer into out.
func (s *Store) do(ctx context.Context, method, op string, req, out any) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	ctx, cancel := store.WithDefaultTimeout(ctx, s.timeout)
	defer cancel()
	var body io.Reader
	if req != nil {
		b, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("remotestore: %s: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, method, s.base+Prefix+op, body)
	if err != nil {
		return fmt.Errorf("remotestore: %s: %w: %w", op, store.ErrInvalid, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if s.token != "" {
		hr.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.http.Do(hr)
	if err != nil {
		return store.Unavailable(op, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return store.Unavailable(op, err)
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		// A configuration error, not an outage: retrying will not help.
		return fmt.Errorf("remotestore: %s: the service refused the call (HTTP %d: %s): its store door needs a token with the admin verb on every dimension (WithToken, SLUICE_TOKEN)", op, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	if resp.StatusCode != http.StatusOK {
		var e wireError
		if json.Unmarshal(raw, &e) == nil && e.Message != "" {
			return e.decode()
		}
		return store.Unavailable(op, fmt.Errorf("HTTP %d from %s", resp.StatusCode, s.base))
	}
	if op == "Capabilities" {
		return json.Unmarshal(raw, out)
	}
	var ans answer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return store.Unavailable(op, fmt.Errorf("malformed answer: %w", err))
	}
	if len(ans.Result) > 0 && out != nil {
		if err := json.Unmarshal(ans.Result, out); err != nil {
			return store.Unavailable(op, fmt.Errorf("malformed result: %w", err))
		}
	}
	if ans.Error != nil {
		return ans.Error.decode()
	}
	return nil
}

func call[Res any](ctx context.Context, s *Store, op string, req any) (Res, error) {
	var res Res
	err := s.do(ctx, http.MethodPost, op, req, &res)
	return res, err
}

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	*res = store.AcquireResult{Items: res.Items[:0]}
	return s.do(ctx, http.MethodPost, "Acquire", req, res)
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	return call[store.ReleaseResult](ctx, s, "Release", req)
}

// Adjust implements store.Store.
func (s *Store) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	return call[store.Settlement](ctx, s, "Adjust", req)
}

// Extend implements store.Store.
func (s *Store) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	return call[time.Time](ctx, s, "Extend", req)
}

// Penalize implements store.Store.
func (s *Store) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	return call[store.Penalty](ctx, s, "Penalize", req)
}

// Peek implements store.Store.
func (s *Store) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	return call[[]store.BucketState](ctx, s, "Peek", req)
}

// Reconcile implements store.Store.
func (s *Store) Reconcile(ctx context.Context, req store.ReconcileRequest) (store.ReconcileResult, error) {
	return call[store.ReconcileResult](ctx, s, "Reconcile", req)
}

// PutBucket implements store.Store.
func (s *Store) PutBucket(ctx context.Context, req store.PutBucketRequest) error {
	return s.do(ctx, http.MethodPost, "PutBucket", req, nil)
}

// DeleteBucket implements store.Store.
func (s *Store) DeleteBucket(ctx context.Context, req store.DeleteBucketRequest) error {
	return s.do(ctx, http.MethodPost, "DeleteBucket", req, nil)
}

// ListBuckets implements store.Store.
func (s *Store) ListBuckets(ctx context.Context, req store.ListBucketsRequest) ([]store.BucketState, error) {
	return call[[]store.BucketState](ctx, s, "ListBuckets", req)
}

// Leases implements store.Store.
func (s *Store) Leases(ctx context.Context, q store.LeaseQuery) ([]store.LeaseRecord, error) {
	return call[[]store.LeaseRecord](ctx, s, "Leases", q)
}

// full is the store with the optional operations of store.Queuer,
// store.Cooler and store.Syncer.
type full struct{ *Store }

// Reserve implements store.Queuer.
func (s *full) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	*res = store.ReserveResult{Items: res.Items[:0]}
	return s.do(ctx, http.MethodPost, "Reserve", req, res)
}

// Cancel implements store.Queuer.
func (s *full) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	return call[store.CancelResult](ctx, s.Store, "Cancel", req)
}

// Dequeue implements store.Queuer.
func (s *full) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	return s.do(ctx, http.MethodPost, "Dequeue", req, nil)
}

// Cooldown implements store.Cooler.
func (s *full) Cooldown(ctx context.Context, req store.CooldownRequest) (store.CooldownResult, error) {
	return call[store.CooldownResult](ctx, s.Store, "Cooldown", req)
}

// Sync implements store.Syncer.
func (s *full) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	return call[store.SyncResult](ctx, s.Store, "Sync", req)
}

// watching is the full store with the freed notices of the store behind
// the service.
type watching struct{ *full }

// WatchFreed implements store.FreedWatcher: it reads the service's stream
// of notices, reconnecting after a failure, until ctx ends or the store is
// closed.
func (s *watching) WatchFreed(ctx context.Context, freed func(dimension string)) error {
	for {
		err := s.watchOnce(ctx, freed)
		if ctx.Err() != nil {
			return nil
		}
		if s.closed.Load() {
			return store.ErrClosed
		}
		_ = err
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func (s *watching) watchOnce(ctx context.Context, freed func(string)) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+Prefix+"WatchFreed", nil)
	if err != nil {
		return err
	}
	if s.token != "" {
		hr.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.http.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if dim := sc.Text(); dim != "" {
			freed(dim)
		}
	}
	return sc.Err()
}

var (
	_ store.Queuer       = (*full)(nil)
	_ store.Cooler       = (*full)(nil)
	_ store.Syncer       = (*full)(nil)
	_ store.FreedWatcher = (*watching)(nil)
	_ store.CallerClock  = (*Store)(nil)
)
