package sluice_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// lostStore is a store that lost every lease record (a restart without
// persistence, a failover): it knows no lease, whatever its expiry.
type lostStore struct{ contract.Forward }

func (lostStore) Release(context.Context, store.ReleaseRequest) (store.ReleaseResult, error) {
	return store.ReleaseResult{}, nil
}

func (lostStore) Extend(context.Context, store.ExtendRequest) (time.Time, error) {
	return time.Time{}, store.ErrUnknownLease
}

func (lostStore) Adjust(context.Context, store.AdjustRequest) (store.Settlement, error) {
	return store.Settlement{}, store.ErrUnknownLease
}

// TestLeaseRecordGoneMessage checks what Release, Extend and Adjust say
// about a live lease whose record the store no longer has: the client
// cannot tell a reconciler's reclaim from a store that lost the record, so
// the error names both, and still matches ErrLeaseExpired.
func TestLeaseRecordGoneMessage(t *testing.T) {
	mem := memstore.New()
	t.Cleanup(func() { mem.Close() })
	c, err := sluice.New(lostStore{contract.Forward{Store: mem}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.PutBucket(ctx, sluice.Bucket{Name: "v#concurrent", Config: sluice.ConcurrentLimit(3)}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		op string
		f  func(*sluice.Lease) error
	}{
		{"release", func(l *sluice.Lease) error { return l.Release(ctx) }},
		{"extend", func(l *sluice.Lease) error { return l.Extend(ctx, time.Minute) }},
		{"adjust", func(l *sluice.Lease) error { _, err := l.Adjust(ctx, "v#concurrent", -1); return err }},
	} {
		res, err := c.Acquire(ctx, "v#concurrent")
		if err != nil || res.Lease == nil {
			t.Fatalf("acquire = %+v, %v", res, err)
		}
		err = tt.f(res.Lease)
		if !errors.Is(err, sluice.ErrLeaseExpired) {
			t.Errorf("%s of a lease whose record is gone = %v; want ErrLeaseExpired", tt.op, err)
			continue
		}
		for _, want := range []string{"reconciler", "store lost"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not mention %q; the record is gone either because the reconciler reclaimed it or because the store lost it", tt.op, err, want)
			}
		}
	}
}
