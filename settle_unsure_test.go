package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// lostAdjustStore applies every Adjust once per operation id, as a store
// that keeps operation ids does, and loses the answer of the first one: the
// caller sees ErrUnavailable although the settlement was applied.
type lostAdjustStore struct {
	contract.Forward
	mu      sync.Mutex
	lose    bool
	applied map[store.LeaseID]store.Settlement
	ops     []store.LeaseID
}

func (s *lostAdjustStore) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops = append(s.ops, req.Op)
	res, ok := s.applied[req.Op]
	if !ok {
		var err error
		if res, err = s.Store.Adjust(ctx, req); err != nil {
			return res, err
		}
		s.applied[req.Op] = res
	}
	if s.lose {
		s.lose = false
		return store.Settlement{}, fmt.Errorf("%w: reply lost", store.ErrUnavailable)
	}
	return res, nil
}

// TestSettleAgainAfterAnUnknownOutcome settles 500 → 300, loses the answer
// after the store applied it, and settles again, as a caller retrying an
// error does: the second call must carry the same operation id, so that
// the refund of 200 is applied once.
func TestSettleAgainAfterAnUnknownOutcome(t *testing.T) {
	st := &lostAdjustStore{Forward: contract.Forward{Store: memstore.New()}, applied: map[store.LeaseID]store.Settlement{}}
	clk := &manualClock{t: t0}
	c, err := sluice.New(st, sluice.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.PutBucket(ctx, sluice.Bucket{Name: "v#tpm", Config: sluice.PerMinute(sluice.Tokens, 1000)}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Acquire(ctx, "v#tpm", sluice.WithCost(500), sluice.WithRecord())
	if err != nil || res.Outcome != sluice.Granted {
		t.Fatalf("acquire: %v %v", res.Outcome, err)
	}
	st.lose = true
	if _, err := res.Lease.Settle(ctx, "v#tpm", 300); !errors.Is(err, sluice.ErrUnavailable) {
		t.Fatalf("first settle: %v, want ErrUnavailable", err)
	}
	if _, err := res.Lease.Settle(ctx, "v#tpm", 300); err != nil {
		t.Fatalf("second settle: %v", err)
	}
	if got, want := tokens(t, c, "v#tpm"), int64(700_000); got != want {
		t.Errorf("balance after settling 500 → 300 twice = %d millitokens, want %d (the refund applied once)", got, want)
	}
	if len(st.ops) != 2 || st.ops[0] != st.ops[1] {
		t.Errorf("operation ids = %v, want the same id twice", st.ops)
	}
	// A different settlement afterwards is a new operation.
	if _, err := res.Lease.Settle(ctx, "v#tpm", 250); err != nil {
		t.Fatal(err)
	}
	if got, want := tokens(t, c, "v#tpm"), int64(750_000); got != want {
		t.Errorf("balance after settling to 250 = %d, want %d", got, want)
	}
}
