package sluice_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// blockStore wraps a store; once blocked, every call waits until its
// context is done and returns the bare context error, as a store without a
// timeout of its own would.
type blockStore struct {
	contract.Forward
	blocked atomic.Bool
}

func (b *blockStore) block(ctx context.Context) error {
	if !b.blocked.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (b *blockStore) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	if err := b.block(ctx); err != nil {
		return err
	}
	return b.Store.Acquire(ctx, req, res)
}

func (b *blockStore) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	if err := b.block(ctx); err != nil {
		return store.ReleaseResult{}, err
	}
	return b.Store.Release(ctx, req)
}

func (b *blockStore) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	if err := b.block(ctx); err != nil {
		return store.Settlement{}, err
	}
	return b.Store.Adjust(ctx, req)
}

func (b *blockStore) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	if err := b.block(ctx); err != nil {
		return time.Time{}, err
	}
	return b.Store.Extend(ctx, req)
}

func (b *blockStore) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	if err := b.block(ctx); err != nil {
		return store.Penalty{}, err
	}
	return b.Store.Penalize(ctx, req)
}

func (b *blockStore) Cooldown(ctx context.Context, req store.CooldownRequest) (store.CooldownResult, error) {
	if err := b.block(ctx); err != nil {
		return store.CooldownResult{}, err
	}
	return b.Forward.Cooldown(ctx, req)
}

func (b *blockStore) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	if err := b.block(ctx); err != nil {
		return store.SyncResult{}, err
	}
	return b.Forward.Sync(ctx, req)
}

func (b *blockStore) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	if err := b.block(ctx); err != nil {
		return nil, err
	}
	return b.Store.Peek(ctx, req)
}

func (b *blockStore) PutBucket(ctx context.Context, req store.PutBucketRequest) error {
	if err := b.block(ctx); err != nil {
		return err
	}
	return b.Store.PutBucket(ctx, req)
}

func (b *blockStore) DeleteBucket(ctx context.Context, req store.DeleteBucketRequest) error {
	if err := b.block(ctx); err != nil {
		return err
	}
	return b.Store.DeleteBucket(ctx, req)
}

func (b *blockStore) ListBuckets(ctx context.Context, req store.ListBucketsRequest) ([]store.BucketState, error) {
	if err := b.block(ctx); err != nil {
		return nil, err
	}
	return b.Store.ListBuckets(ctx, req)
}

func (b *blockStore) Leases(ctx context.Context, q store.LeaseQuery) ([]store.LeaseRecord, error) {
	if err := b.block(ctx); err != nil {
		return nil, err
	}
	return b.Store.Leases(ctx, q)
}

func newBlockClient(t *testing.T, opts ...sluice.Option) (*sluice.Client, *blockStore) {
	t.Helper()
	bs := &blockStore{Forward: contract.Forward{Store: memstore.New()}}
	c, err := sluice.New(bs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	putSeedBuckets(t, c)
	return c, bs
}

// Every store call the Client makes is bounded by OpTimeout, and one that
// hits it is reported as the store's unavailability.
func TestOpTimeoutBoundsEveryStoreCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, bs := newBlockClient(t, config(opTimeout(500*time.Millisecond)))
		defer c.Close() // ends the releases of the acquisitions whose answers the hung store kept
		rec, err := c.Acquire(ctx, "elevenlabs#concurrent")
		if err != nil {
			t.Fatal(err)
		}
		tpm, err := c.Acquire(ctx, "openai#tpm", sluice.WithCost(100), sluice.WithRecord())
		if err != nil {
			t.Fatal(err)
		}
		bs.blocked.Store(true)
		tests := []struct {
			name string
			call func() error
		}{
			{"Acquire", func() error { _, err := c.Acquire(ctx, "openai#rpm"); return err }},
			{"AcquireMany", func() error {
				_, err := c.AcquireMany(ctx, []sluice.Request{{Dimension: "openai#rpm", Cost: 1}})
				return err
			}},
			{"Release", func() error { return rec.Lease.Release(ctx) }},
			{"Extend", func() error { return rec.Lease.Extend(ctx, time.Minute) }},
			{"Adjust", func() error { _, err := tpm.Lease.Adjust(ctx, "openai#tpm", 10); return err }},
			{"Settle", func() error { _, err := tpm.Lease.Settle(ctx, "openai#tpm", 50); return err }},
			{"Penalize", func() error { _, err := c.Penalize(ctx, "openai#rpm", 0.5); return err }},
			{"Cooldown", func() error { _, err := c.CooldownFor(ctx, "openai#rpm", time.Second); return err }},
			{"Sync", func() error { _, err := c.Sync(ctx, "openai#rpm", 1); return err }},
			{"Peek", func() error { _, err := c.Peek(ctx, "openai#rpm"); return err }},
			{"GetBucket", func() error { _, err := c.GetBucket(ctx, "openai#rpm"); return err }},
			{"Buckets", func() error { _, err := c.Buckets(ctx); return err }},
			{"PutBucket", func() error {
				return c.PutBucket(ctx, sluice.Bucket{Name: "x#rpm", Config: sluice.PerMinute(sluice.Requests, 1)})
			}},
			{"DeleteBucket", func() error { return c.DeleteBucket(ctx, "openai#rpm") }},
			{"Leases", func() error { _, err := c.Leases(ctx, sluice.LeaseQuery{}); return err }},
		}
		for _, tt := range tests {
			start := time.Now()
			err := tt.call()
			if got, want := time.Since(start), 500*time.Millisecond; got != want {
				t.Errorf("%s returned after %s, want %s", tt.name, got, want)
			}
			if !errors.Is(err, sluice.ErrUnavailable) {
				t.Errorf("%s = %v, want an error matching ErrUnavailable", tt.name, err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s = %v, which matches context.DeadlineExceeded: the caller could not tell it from its own deadline", tt.name, err)
			}
		}
	})
}

// The caller's own deadline, when it comes before OpTimeout, is reported as
// the caller's, and never fails open.
func TestOpTimeoutKeepsCallerDeadline(t *testing.T) {
	for _, policy := range []sluice.FailurePolicy{sluice.FailClosed, sluice.FailOpen} {
		t.Run(policy.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, bs := newBlockClient(t, config(opTimeout(2*time.Second), func(c *sluice.Config) { c.FailurePolicy = policy }))
				bs.blocked.Store(true)
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				res, err := c.Acquire(ctx, "openai#rpm")
				if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sluice.ErrUnavailable) {
					t.Errorf("Acquire = %v, want the caller's context.DeadlineExceeded, not ErrUnavailable", err)
				}
				if res.Granted() {
					t.Errorf("Acquire granted on the caller's own deadline")
				}
			})
		})
	}
}

// Under FailOpen, an acquisition that hits OpTimeout is a degraded grant:
// the store did not answer.
func TestOpTimeoutFailsOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, bs := newBlockClient(t, config(failOpen))
		defer c.Close() // ends the background release of the acquisition the hung store may have granted
		bs.blocked.Store(true)
		start := time.Now()
		res, err := c.Acquire(context.Background(), "openai#rpm")
		if err != nil || !res.Degraded {
			t.Fatalf("Acquire = %+v, %v; want a degraded grant", res, err)
		}
		if got, want := time.Since(start), sluice.DefaultConfig().OpTimeout; got != want {
			t.Errorf("degraded after %s, want the default OpTimeout %s", got, want)
		}
	})
}

func TestOpTimeoutConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    time.Duration
		wantErr string // the field the error must name
	}{
		{"default", nil, 2 * time.Second, ""},
		{"seconds", map[string]string{"SLUICE_OP_TIMEOUT": "0.5"}, 500 * time.Millisecond, ""},
		{"duration", map[string]string{"SLUICE_OP_TIMEOUT": "5s"}, 5 * time.Second, ""},
		{"disabled", map[string]string{"SLUICE_OP_TIMEOUT": "0"}, 0, ""},
		{"negative", map[string]string{"SLUICE_OP_TIMEOUT": "-1"}, 0, "SLUICE_OP_TIMEOUT"},
		{"negative duration", map[string]string{"SLUICE_OP_TIMEOUT": "-1s"}, 0, "SLUICE_OP_TIMEOUT"},
		{"garbage", map[string]string{"SLUICE_OP_TIMEOUT": "soon"}, 0, "SLUICE_OP_TIMEOUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := sluice.ConfigFromLookup(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if tt.wantErr != "" {
				var fe *sluice.FieldError
				if !errors.As(err, &fe) || fe.Field != tt.wantErr {
					t.Fatalf("error = %v, want a FieldError naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.OpTimeout; got != tt.want {
				t.Errorf("OpTimeout = %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := sluice.New(memstore.New(), config(opTimeout(-time.Second))); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("New with a negative OpTimeout = %v, want ErrInvalid", err)
	}
}
