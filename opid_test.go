package sluice_test

import (
	"context"
	"sync"
	"testing"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// opStore records the operation id of every Adjust, Penalize and Release
// it receives and answers the first of each with store.ErrContention, so
// that the client retries it.
type opStore struct {
	contract.Forward
	mu  sync.Mutex
	ops map[string][]store.LeaseID
}

func (s *opStore) seen(op string, id store.LeaseID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops[op] = append(s.ops[op], id)
	return len(s.ops[op]) == 1
}

func (s *opStore) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	if s.seen("adjust", req.Op) {
		return store.Settlement{}, store.ErrContention
	}
	return s.Store.Adjust(ctx, req)
}

func (s *opStore) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	if s.seen("penalize", req.Op) {
		return store.Penalty{}, store.ErrContention
	}
	return s.Store.Penalize(ctx, req)
}

func (s *opStore) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	if s.seen("release", req.Op) {
		return store.ReleaseResult{}, store.ErrContention
	}
	return s.Store.Release(ctx, req)
}

// TestOperationIDKeptAcrossRetries: each mutating call carries an operation
// id, the same on every retry of the call, and a new one for the next call,
// so that a store applies the call at most once however often it is sent.
func TestOperationIDKeptAcrossRetries(t *testing.T) {
	ctx := context.Background()
	s := &opStore{Forward: contract.Forward{Store: memstore.New()}, ops: map[string][]store.LeaseID{}}
	c, err := sluice.New(s)
	if err != nil {
		t.Fatal(err)
	}
	putSeedBuckets(t, c)
	var calls []map[string][]store.LeaseID
	for range 2 {
		r, err := c.Acquire(ctx, "openai#tpm", sluice.WithCost(500), sluice.WithRecord())
		if err != nil || !r.Granted() {
			t.Fatalf("acquire: %+v, %v", r, err)
		}
		if _, err := r.Lease.Settle(ctx, "openai#tpm", 300); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Penalize(ctx, "openai#tpm", 0.9); err != nil {
			t.Fatal(err)
		}
		if err := r.Lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		calls = append(calls, s.ops)
		s.ops = map[string][]store.LeaseID{}
		s.mu.Unlock()
	}
	for _, op := range []string{"adjust", "penalize", "release"} {
		a, b := calls[0][op], calls[1][op]
		if len(a) != 2 || a[0].IsZero() || a[0] != a[1] {
			t.Errorf("%s sent with operation ids %v, want one non-zero id, sent twice (first and retry)", op, a)
		}
		if len(b) != 2 || b[0] == a[0] {
			t.Errorf("%s: the next call sent ids %v, want a new one (the first call's was %v)", op, b, a[0])
		}
	}
}
