package benchrun

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// deadlineStore is a store whose calls take deadlineLatency and that
// derives its own timeout from the context's deadline, as network clients
// do (a socket deadline, a server-side statement timeout): a call that
// would outlast the deadline reports it a moment before the context's own
// timer fires, while ctx.Err() is still nil.
type deadlineStore struct{ contract.Forward }

const deadlineLatency = 10 * time.Millisecond

func (s deadlineStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < deadlineLatency {
		time.Sleep(time.Until(d) - time.Millisecond)
		return store.Unavailable("acquire", context.DeadlineExceeded)
	}
	time.Sleep(deadlineLatency)
	return s.Store.Acquire(ctx, req, res)
}

// downStore fails every acquisition: a real store error.
type downStore struct{ contract.Forward }

func (downStore) Acquire(context.Context, *store.AcquireRequest, *store.AcquireResult) error {
	return store.Unavailable("acquire", errors.New("connection refused"))
}

func newMem(t *testing.T) store.Store {
	t.Helper()
	st := memstore.New()
	b := sluice.Bucket{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 600, time.Minute)}
	if err := client(t, st).PutBucket(context.Background(), b, sluice.ResetTokens()); err != nil {
		t.Fatal(err)
	}
	return st
}

// noOpTimeout returns the default Config without an OpTimeout.
func noOpTimeout() sluice.Config {
	cfg := sluice.DefaultConfig()
	cfg.OpTimeout = 0
	return cfg
}

// client returns a Client over st without an OpTimeout, so that the only
// deadline a call can carry is the caller's. It is closed when the test
// ends, which ends the releases its failed calls left in the background.
func client(t *testing.T, st store.Store) *sluice.Client {
	t.Helper()
	c, err := sluice.New(st, sluice.WithConfig(noOpTimeout()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var cfg = Config{Items: []store.Item{{Dimension: "v#rpm", Cost: 1}}, Workers: 3, Duration: 500 * time.Millisecond, TTL: time.Minute}

// The end of a run is not a store error: a wait's calls in flight when the
// duration ends, which the wait's deadline (the run's end) cuts, are not
// counted as errors, even when the store reports the deadline before the
// context does; a store that fails is still counted.
func TestRunEndIsNotAStoreError(t *testing.T) {
	tests := []struct {
		name       string
		wrap       func(store.Store) store.Store
		wantErrors bool
		wantGrants bool
	}{
		{"store that reports deadlines early", func(s store.Store) store.Store { return deadlineStore{contract.Forward{Store: s}} }, false, true},
		{"store down", func(s store.Store) store.Store { return downStore{contract.Forward{Store: s}} }, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, err := Run(context.Background(), client(t, tt.wrap(newMem(t))), cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got := p.Errors > 0; got != tt.wantErrors {
					t.Errorf("errors = %d (first: %q), want errors %v", p.Errors, p.FirstErr, tt.wantErrors)
				}
				if tt.wantErrors && !strings.Contains(p.FirstErr, "connection refused") {
					t.Errorf("first error = %q, want the store's", p.FirstErr)
				}
				if got := p.Granted > 0; got != tt.wantGrants {
					t.Errorf("granted = %d, want grants %v", p.Granted, tt.wantGrants)
				}
			})
		})
	}
}

// blockStore's Acquire waits until its context is done.
type blockStore struct{ contract.Forward }

func (blockStore) Acquire(ctx context.Context, _ *store.AcquireRequest, _ *store.AcquireResult) error {
	<-ctx.Done()
	return store.Unavailable("acquire", ctx.Err())
}

// The caller's cancellation (an interrupted bench) cuts the calls in
// flight, and what it cuts is not counted.
func TestRunCallerCancelCutsCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		p, err := Run(ctx, client(t, blockStore{contract.Forward{Store: newMem(t)}}), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.Errors != 0 || p.Granted != 0 {
			t.Errorf("errors %d, granted %d; want none", p.Errors, p.Granted)
		}
		if got, want := p.End.Sub(p.Start), 100*time.Millisecond; got != want {
			t.Errorf("run took %s, want %s (cut at the cancel)", got, want)
		}
	})
}

// A client clock that stands still never ends a wait's timeout: the run
// still ends, EndGrace after its duration, and what it cuts is not
// counted.
func TestRunEndsOnAStoppedClock(t *testing.T) {
	for _, wait := range []string{"poll", "reserve"} {
		t.Run(wait, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newMem(t)
				fixed := time.Now()
				c, err := sluice.New(st, sluice.WithConfig(noOpTimeout()), sluice.WithClock(sluice.ClockFunc(func() time.Time { return fixed })))
				if err != nil {
					t.Fatal(err)
				}
				run := cfg
				run.Wait = wait
				p, err := Run(context.Background(), c, run, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := p.End.Sub(p.Start), cfg.Duration+EndGrace; got > want {
					t.Errorf("run took %s, want at most %s", got, want)
				}
				// The burst, and reservations valid within the run on the
				// store's (stopped) clock.
				if p.Errors != 0 || p.Granted < 600 || p.Granted > 605 {
					t.Errorf("errors %d, granted %d; want 0 and the bucket's 600 to 605", p.Errors, p.Granted)
				}
			})
		})
	}
}
