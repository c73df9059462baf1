package sluice_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// lateStore logs every Adjust and follows the store contract for late
// usage: a positive delta on an unrecorded lease is applied even after the
// lease's ExpiresAt. Recorded adjusts go to memstore as they are.
type lateStore struct {
	contract.Forward
	mu      sync.Mutex
	adjusts []store.AdjustRequest
}

func (s *lateStore) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	s.mu.Lock()
	s.adjusts = append(s.adjusts, req)
	s.mu.Unlock()
	if !req.Recorded && req.Delta > 0 {
		req.ExpiresAt = time.Time{}
	}
	return s.Store.Adjust(ctx, req)
}

func (s *lateStore) log() []store.AdjustRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.AdjustRequest(nil), s.adjusts...)
}

// Usage reported after a lease expired still counts at the vendor: a
// positive charge is sent to the store and applied, also when the
// reconciler already deleted the lease's record (then as an unrecorded
// adjust of the cost held); only refunds are refused with ErrLeaseExpired.
func TestLateUsageAfterExpiry(t *testing.T) {
	const dim = "openai#tpm"
	tests := []struct {
		name      string
		record    bool
		reconcile bool // the reconciler deleted the record
		op        func(context.Context, *sluice.Lease) error
		wantErr   error
		wantDebit int64 // millitokens taken from the balance by op
		wantHeld  int64 // the lease's cost after op
		wantSent  []store.AdjustRequest
	}{
		{
			name: "unrecorded charge", op: adjust(50), wantDebit: 50_000, wantHeld: 150,
			wantSent: []store.AdjustRequest{{Recorded: false, Delta: 50, Held: 100}},
		},
		{
			name: "unrecorded settle up", op: settle(130), wantDebit: 30_000, wantHeld: 130,
			wantSent: []store.AdjustRequest{{Recorded: false, Delta: 30, Held: 100}},
		},
		{name: "unrecorded refund", op: adjust(-50), wantErr: sluice.ErrLeaseExpired, wantHeld: 100},
		{
			name: "recorded, reclaimed, charge", record: true, reconcile: true, op: adjust(50), wantDebit: 50_000, wantHeld: 150,
			wantSent: []store.AdjustRequest{{Recorded: true, Delta: 50}, {Recorded: false, Delta: 50, Held: 100}},
		},
		{
			name: "recorded, reclaimed, refund", record: true, reconcile: true, op: settle(60), wantErr: sluice.ErrLeaseExpired, wantHeld: 100,
			wantSent: []store.AdjustRequest{{Recorded: true, Delta: -40}},
		},
		{
			name: "recorded, expired, charge", record: true, op: adjust(50), wantDebit: 50_000, wantHeld: 150,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			ls := &lateStore{Forward: contract.Forward{Store: memstore.New()}}
			clk := &manualClock{t: t0}
			c, err := sluice.New(ls, sluice.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			putSeedBuckets(t, c)
			opts := []sluice.AcquireOption{sluice.WithCost(100), sluice.WithTTL(time.Second)}
			if tt.record {
				opts = append(opts, sluice.WithRecord())
			}
			res, err := c.Acquire(ctx, dim, opts...)
			if err != nil || !res.Granted() {
				t.Fatalf("acquire = %v, %v", res.Outcome, err)
			}
			l := res.Lease
			clk.Advance(2 * time.Second)
			if tt.reconcile {
				if _, err := ls.Reconcile(ctx, store.ReconcileRequest{Now: clk.Now(), Limit: store.DefaultReconcileLimit}); err != nil {
					t.Fatal(err)
				}
			}
			before := tokens(t, c, dim)
			err = tt.op(ctx, l)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if got := before - tokens(t, c, dim); got != tt.wantDebit {
				t.Errorf("debited %d millitokens, want %d", got, tt.wantDebit)
			}
			if got := l.Cost(dim); got != tt.wantHeld {
				t.Errorf("lease cost = %d, want %d", got, tt.wantHeld)
			}
			if tt.wantSent == nil {
				return
			}
			sent := ls.log()
			if len(sent) != len(tt.wantSent) {
				t.Fatalf("store got %d adjusts %+v, want %d", len(sent), sent, len(tt.wantSent))
			}
			for i, want := range tt.wantSent {
				got := sent[i]
				if got.Recorded != want.Recorded || got.Delta != want.Delta || (!got.Recorded && got.Held != want.Held) {
					t.Errorf("adjust %d = %+v, want Recorded %v, Delta %d, Held %d", i, got, want.Recorded, want.Delta, want.Held)
				}
				if !got.Recorded && !got.ExpiresAt.Equal(l.ExpiresAt()) {
					t.Errorf("adjust %d ExpiresAt = %s, want the lease's %s", i, got.ExpiresAt, l.ExpiresAt())
				}
			}
		})
	}
}

func adjust(delta int64) func(context.Context, *sluice.Lease) error {
	return func(ctx context.Context, l *sluice.Lease) error {
		_, err := l.Adjust(ctx, "openai#tpm", delta)
		return err
	}
}

func settle(actual int64) func(context.Context, *sluice.Lease) error {
	return func(ctx context.Context, l *sluice.Lease) error {
		_, err := l.Settle(ctx, "openai#tpm", actual)
		return err
	}
}
