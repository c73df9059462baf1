package sluice_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// lostAcquireStore applies the first acquisitions it is asked for and then
// loses their answers, as a store that acted before the connection broke:
// the client sees ErrUnavailable although the lease exists. While down, it
// fails releases too.
type lostAcquireStore struct {
	store.Store
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
		st := &lostAcquireStore{Store: memstore.New(), lose: 1, down: true}
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
