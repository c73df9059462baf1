package storetest

import (
	"context"
	"testing"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// forgetfulStore empties a bucket on Cooldown instead of cooling it, and
// reports the cooldown's end everywhere as a correct store would: only
// the grants it makes during the cooldown (at the refill rate) give it
// away.
type forgetfulStore struct {
	contract.Forward
	until map[string]int64
}

func (s *forgetfulStore) Cooldown(ctx context.Context, req store.CooldownRequest) (store.CooldownResult, error) {
	r, err := s.Forward.Sync(ctx, store.SyncRequest{Now: req.Now, Dimension: req.Dimension})
	if err != nil {
		return store.CooldownResult{}, err
	}
	s.until[req.Dimension] = max(s.until[req.Dimension], req.Until.UnixMilli())
	return store.CooldownResult{Before: r.Before, After: r.After, Until: s.until[req.Dimension]}, nil
}

func (s *forgetfulStore) fake(bs []store.BucketState) []store.BucketState {
	for i := range bs {
		bs[i].CooldownUntil = s.until[bs[i].Name]
	}
	return bs
}

func (s *forgetfulStore) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	bs, err := s.Store.Peek(ctx, req)
	return s.fake(bs), err
}

func (s *forgetfulStore) ListBuckets(ctx context.Context, req store.ListBucketsRequest) ([]store.BucketState, error) {
	bs, err := s.Store.ListBuckets(ctx, req)
	return s.fake(bs), err
}

func (s *forgetfulStore) DeleteBucket(ctx context.Context, req store.DeleteBucketRequest) error {
	delete(s.until, req.Name)
	return s.Store.DeleteBucket(ctx, req)
}

// TestModelCatchesAStoreThatIgnoresCooldowns proves the model-based test
// acquires during cooldowns: it rejects a store that only empties the
// bucket.
func TestModelCatchesAStoreThatIgnoresCooldowns(t *testing.T) {
	h := Harness{NewStore: func(testing.TB) store.Store { return memstore.New() }}
	var failed *modelFailure
	for seed := uint64(1); seed <= 100 && failed == nil; seed++ {
		mc := &modelChecker{h: h, s: contract.Checked(&forgetfulStore{Forward: contract.Forward{Store: memstore.New()}, until: map[string]int64{}})}
		failed = mc.check(seed, mc.generate(seed))
	}
	if failed == nil {
		t.Fatal("the model-based test accepted a store that grants during a cooldown")
	}
	t.Logf("caught: %s", failed.what)
}

// TestGeneratorCoversCooldownAndSync counts, over the default number of
// random sequences, the cooldown and sync outcomes the model-based test
// checks, and fails if one never occurs.
func TestGeneratorCoversCooldownAndSync(t *testing.T) {
	counts := map[string]int{}
	for seed := uint64(1); seed <= DefaultModelSequences; seed++ {
		mc := &modelChecker{}
		steps := mc.generate(seed)
		m := newModel(0)
		cooling := map[string]bool{}
		for _, st := range steps {
			e := m.apply(st)
			switch st.Op {
			case "cooldown", "sync":
				k := st.Op + " " + e.Error
				if e.Error == "" {
					k = st.Op + " ok"
					if st.Op == "sync" && e.After < e.Before {
						k = "sync lowered"
					}
					if st.Op == "cooldown" {
						cooling[st.Dimension] = true
					}
				}
				counts[k]++
			case "acquire":
				for _, it := range e.Items {
					if b := m.buckets[it.Dimension]; b != nil && cooling[it.Dimension] && m.base+st.AtMs < b.st.Until {
						counts["acquire during a cooldown"]++
					}
				}
			}
		}
	}
	t.Logf("%v", counts)
	for _, k := range []string{"cooldown ok", "cooldown ErrInvalid", "cooldown ErrUnknownDimension", "sync ok", "sync lowered",
		"sync ErrInvalid", "sync ErrUnknownDimension", "acquire during a cooldown"} {
		if counts[k] < 20 {
			t.Errorf("%q happened %d times in %d sequences, want at least 20", k, counts[k], DefaultModelSequences)
		}
	}
}

// TestInvariantNoGrantDuringCooldown proves the invariant fires on a grant
// decided before a bucket's cooldown ends, and only then.
func TestInvariantNoGrantDuringCooldown(t *testing.T) {
	m := newModel(1000)
	m.apply(putB(0, "a#rpm", "requests", 10, 10, 60_000))
	m.apply(Step{AtMs: 0, Op: "cooldown", Dimension: "a#rpm", CooldownMs: 500})
	st := acq(400, "L", 1000, false, it("a#rpm", 1))
	tests := []struct {
		decided int64
		want    bool
	}{{1499, true}, {1500, false}, {2000, false}}
	for _, tt := range tests {
		m.decided = []int64{tt.decided}
		if got := cooledGrant(m, st) != ""; got != tt.want {
			t.Errorf("grant decided at %d with the cooldown ending at 1500: reported %t, want %t", tt.decided, got, tt.want)
		}
	}
}
