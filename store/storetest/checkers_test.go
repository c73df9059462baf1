package storetest

import (
	"context"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// lyingStore is a correct store that over-reports every balance Peek
// returns by one token after its first honest calls: a stale or wrong read
// that both checkers must catch.
type lyingStore struct {
	contract.Forward
	peeks, honest int
}

func (s *lyingStore) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	bs, err := s.Store.Peek(ctx, req)
	if s.peeks++; s.peeks > s.honest {
		for i := range bs {
			bs[i].Tokens += 1000
		}
	}
	return bs, err
}

// TestCheckersCatchALyingStore proves the model-based and linearizability
// checkers can fail: both reject a store whose reads are wrong, and accept
// the same store when it tells the truth.
func TestCheckersCatchALyingStore(t *testing.T) {
	h := Harness{NewStore: func(testing.TB) store.Store { return memstore.New() }}
	var failed bool
	for seed := uint64(1); seed <= 50 && !failed; seed++ {
		mc := &modelChecker{h: h, s: contract.Checked(&lyingStore{Forward: contract.Forward{Store: memstore.New()}, honest: 2})}
		failed = mc.check(seed, mc.generate(seed)) != nil
	}
	if !failed {
		t.Error("the model-based test accepted a store whose Peek over-reports balances")
	}
	liar := contract.Checked(&lyingStore{Forward: contract.Forward{Store: memstore.New()}})
	mc := &modelChecker{h: h, s: liar}
	if res, _ := mc.linearizable([]store.Store{liar, liar}, 1); res != porcupine.Illegal {
		t.Errorf("linearizability check of a lying store = %s, want %s", res, porcupine.Illegal)
	}
	honest := contract.Checked(memstore.New())
	mc = &modelChecker{h: h, s: honest}
	if res, _ := mc.linearizable([]store.Store{honest, honest}, 1); res != porcupine.Ok {
		t.Errorf("linearizability check of memstore = %s, want %s", res, porcupine.Ok)
	}
}
