package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// lostAcquireStore applies the first acquisitions it is asked for and then
// loses their answers, as a store that acted before the connection broke:
// the client sees ErrUnavailable although the lease exists. While down, it
// fails releases too.
type lostAcquireStore struct {
	contract.Forward
	mu    sync.Mutex
	lose  int  // acquisitions whose answer is lost
	down  bool // releases fail while set
	calls int  // releases that reached it
}

func (s *lostAcquireStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	if err := s.Store.Acquire(ctx, req, res); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lose > 0 {
		s.lose--
		return store.Unavailable("acquire", errors.New("connection reset after the server acted"))
	}
	return nil
}

func (s *lostAcquireStore) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	s.mu.Lock()
	s.calls++
	down := s.down
	s.mu.Unlock()
	if down {
		return store.ReleaseResult{}, store.Unavailable("release", errors.New("still down"))
	}
	return s.Store.Release(ctx, req)
}

func (s *lostAcquireStore) setDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// TestUnknownAcquisitionIsReleasedInTheBackground: an acquisition of a
// concurrent slot whose answer was lost fails with ErrUnavailable, but the
// store may have granted it, and nobody holds that lease. The client, which
// chose its id, releases it in the background until it would have expired,
// so the slot comes back as soon as the store answers, not a TTL later.
func TestUnknownAcquisitionIsReleasedInTheBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &lostAcquireStore{Forward: contract.Forward{Store: memstore.New()}, lose: 1, down: true}
		c, err := sluice.New(st)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		_, err = c.Acquire(ctx, "v#concurrent", sluice.WithTTL(time.Hour))
		if !errors.Is(err, sluice.ErrUnavailable) {
			t.Fatalf("acquire with its answer lost: %v, want ErrUnavailable", err)
		}
		free := func() int64 {
			s, err := c.GetBucket(ctx, "v#concurrent")
			if err != nil {
				t.Fatal(err)
			}
			return int64(s.Tokens)
		}
		if got := free(); got != 0 {
			t.Fatalf("the store granted the lost acquisition: %d millislots free, want 0", got)
		}
		time.Sleep(10 * time.Second) // the store stays down: releases fail
		st.setDown(false)
		time.Sleep(10 * time.Second) // the next background attempt gets through
		synctest.Wait()
		if got := free(); got != 1000 {
			t.Errorf("after the store came back: %d millislots free, want 1000 (the lost lease released)", got)
		}
		st.mu.Lock()
		calls := st.calls
		st.mu.Unlock()
		if calls < 2 {
			t.Errorf("%d releases reached the store, want retries while it was down", calls)
		}
	})
}

// cutOffStore applies acquisitions and then holds their answers until the
// caller's context ends, as a store whose reply is still on the wire when
// the caller gives up. It counts the releases that reach it.
type cutOffStore struct {
	contract.Forward
	mu       sync.Mutex
	hold     bool
	releases int
}

func (s *cutOffStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	if err := s.Store.Acquire(ctx, req, res); err != nil {
		return err
	}
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	if hold {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (s *cutOffStore) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	s.mu.Lock()
	s.releases++
	s.mu.Unlock()
	return s.Store.Release(ctx, req)
}

// TestCutOffAcquisitionIsReleasedByTheNextOne: a caller that gives up while
// its acquisition is in flight leaves a lease the store granted. No work
// outlives the call (it starts no goroutine); the client's next
// acquisition that the store answers releases the lease.
func TestCutOffAcquisitionIsReleasedByTheNextOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &cutOffStore{Forward: contract.Forward{Store: memstore.New()}, hold: true}
		c, err := sluice.New(st)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []sluice.Bucket{
			{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)},
			{Name: "v#rpm", Config: sluice.PerMinute(sluice.Requests, 600)},
		} {
			if err := c.PutBucket(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = c.Acquire(cctx, "v#concurrent", sluice.WithTTL(time.Hour))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("acquire cut off by its caller: %v, want context.DeadlineExceeded", err)
		}
		synctest.Wait()
		free := func() int64 {
			s, err := c.GetBucket(ctx, "v#concurrent")
			if err != nil {
				t.Fatal(err)
			}
			return int64(s.Tokens)
		}
		if got := free(); got != 0 {
			t.Fatalf("the store granted the cut-off acquisition: %d millislots free, want 0", got)
		}
		st.mu.Lock()
		st.hold = false
		st.mu.Unlock()
		time.Sleep(time.Second) // past the first attempt's backoff
		if _, err := c.Acquire(ctx, "v#rpm"); err != nil {
			t.Fatal(err)
		}
		if got := free(); got != 1000 {
			t.Errorf("after the next acquisition: %d millislots free, want 1000 (the cut-off lease released)", got)
		}
		st.mu.Lock()
		got := st.releases
		st.mu.Unlock()
		if got != 1 {
			t.Errorf("%d releases reached the store, want 1", got)
		}
	})
}

// refusedStore fails every acquisition as a connection refused: the
// request never left, so there is nothing to release.
type refusedStore struct {
	cutOffStore
}

func (s *refusedStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	return store.Unavailable("acquire", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
}

// TestRefusedAcquisitionIsNotReleased: an acquisition that could not
// connect has a known outcome, nothing granted; the client sends no release.
func TestRefusedAcquisitionIsNotReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &refusedStore{cutOffStore{Forward: contract.Forward{Store: memstore.New()}}}
		c, err := sluice.New(st)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Acquire(ctx, "v#concurrent"); !errors.Is(err, sluice.ErrUnavailable) {
			t.Fatalf("acquire refused: %v, want ErrUnavailable", err)
		}
		time.Sleep(time.Minute)
		st.mu.Lock()
		got := st.releases
		st.mu.Unlock()
		if got != 0 {
			t.Errorf("%d releases reached the store, want 0: a refused connection granted nothing", got)
		}
	})
}

// lateAcquireStore fails an acquisition at once and applies it only after the
// first release reached it, as a frozen server applies what its socket
// held when it resumes, after the client gave up.
type lateAcquireStore struct {
	contract.Forward
	mu       sync.Mutex
	pending  *store.AcquireRequest
	releases int
}

func (s *lateAcquireStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil && s.releases == 0 {
		r := *req
		s.pending = &r
		return store.Unavailable("acquire", errors.New("i/o timeout"))
	}
	return s.Store.Acquire(ctx, req, res)
}

func (s *lateAcquireStore) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	res, err := s.Store.Release(ctx, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releases++
	if p := s.pending; p != nil {
		s.pending = nil
		var r store.AcquireResult
		if aerr := s.Store.Acquire(ctx, p, &r); aerr != nil || !r.Granted {
			return res, fmt.Errorf("the late acquisition: %v %+v", aerr, r)
		}
	}
	return res, err
}

// TestLateFirstAcquisitionIsReleased: the client's first acquisition on a
// concurrent dimension fails with its outcome unknown, so the client has
// not learned that the dimension keeps lease records; the first release
// finds none, and the acquisition lands after it. The client reads the
// dimension's type and keeps releasing until the late lease is gone.
func TestLateFirstAcquisitionIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memstore.New()
		admin, err := sluice.New(mem)
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		st := &lateAcquireStore{Forward: contract.Forward{Store: mem}}
		c, err := sluice.New(st)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Acquire(ctx, "v#concurrent", sluice.WithTTL(time.Hour)); !errors.Is(err, sluice.ErrUnavailable) {
			t.Fatalf("first acquisition: %v, want ErrUnavailable", err)
		}
		time.Sleep(time.Minute)
		s, err := admin.GetBucket(ctx, "v#concurrent")
		if err != nil {
			t.Fatal(err)
		}
		st.mu.Lock()
		releases := st.releases
		st.mu.Unlock()
		if s.Tokens != 1000 || releases < 2 {
			t.Errorf("a minute after the late acquisition: %d millislots free after %d releases, want 1000 (released) after at least 2", s.Tokens, releases)
		}
	})
}

// TestUnknownReleaseEndsWhateverTheClock: with a client clock that never
// moves, the background release still ends when the lease would have
// expired on the runtime's clock; nothing is left running (synctest
// fails on a goroutine left behind), without Close.
func TestUnknownReleaseEndsWhateverTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &lostAcquireStore{Forward: contract.Forward{Store: memstore.New()}, lose: 1, down: true}
		fixed := time.Now()
		c, err := sluice.New(st, sluice.WithClock(sluice.ClockFunc(func() time.Time { return fixed })))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Acquire(ctx, "v#concurrent", sluice.WithTTL(time.Minute)); !errors.Is(err, sluice.ErrUnavailable) {
			t.Fatalf("acquire with its answer lost: %v, want ErrUnavailable", err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
	})
}

// Failing open, an acquisition whose answer was lost after the store
// granted it is a degraded grant, and the store's lease is still released
// in the background: the slot does not stay taken until its TTL once the
// degraded lease's holder is done.
func TestFailOpenReleasesALostGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &lostAcquireStore{Forward: contract.Forward{Store: memstore.New()}, lose: 1}
		c, err := sluice.New(st, config(failOpen))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		res, err := c.Acquire(ctx, "v#concurrent", sluice.WithTTL(time.Hour))
		if err != nil || !res.Degraded {
			t.Fatalf("acquire = %+v, %v; want a degraded grant", res, err)
		}
		if err := res.Lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if free := tokens(t, c, "v#concurrent"); free != 1000 {
			t.Errorf("a minute after the degraded lease's release: %d millislots free, want 1000 (the store's lease is held until its TTL of 1h)", free)
		}
		r2, err := c.Acquire(ctx, "v#concurrent")
		if err != nil || !r2.Granted() || r2.Degraded {
			t.Errorf("next acquire = %v (degraded %v), %v; want a grant by the store", r2.Outcome, r2.Degraded, err)
		}
	})
}

// Failing open, the store's lease of a lost grant stays counted while the
// degraded lease is held: another process is refused the slot until the
// degraded holder releases it (two holders on a limit of one otherwise).
func TestFailOpenLostGrantCountsWhileHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memstore.New()
		st := &lostAcquireStore{Forward: contract.Forward{Store: mem}, lose: 1}
		a, err := sluice.New(st, config(failOpen))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := sluice.New(mem) // another process of the fleet
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := a.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(1)}); err != nil {
			t.Fatal(err)
		}
		res, err := a.Acquire(ctx, "v#concurrent", sluice.WithTTL(time.Hour))
		if err != nil || !res.Degraded {
			t.Fatalf("acquire = %+v, %v; want a degraded grant", res, err)
		}
		time.Sleep(10 * time.Second) // the degraded holder works; the store is healthy
		synctest.Wait()
		other, err := b.Acquire(ctx, "v#concurrent")
		if err != nil {
			t.Fatal(err)
		}
		if other.Granted() {
			_ = other.Lease.Release(ctx)
			t.Errorf("another process was granted the only slot while the degraded lease is held")
		}
		if err := res.Lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if other, err := b.Acquire(ctx, "v#concurrent"); err != nil || !other.Granted() {
			t.Errorf("after the degraded lease's release: %v, %v; want the slot", other.Outcome, err)
		}
	})
}
