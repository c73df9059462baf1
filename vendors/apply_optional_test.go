package vendors_test

import (
	"context"
	"testing"

	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// coreOnly is the memory store without its optional operations.
type coreOnly struct{ store.Store }

// syncOnly is the memory store with Sync (store.Syncer) as its one
// optional operation: no cooldowns, no waiter queues.
type syncOnly struct {
	store.Store
	m *memstore.Store
}

func (s syncOnly) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	return s.m.Sync(ctx, req)
}

// A store without cooldowns has a 429's dimension emptied, as for a 429
// without a delay.
func TestReactorWithoutCooldownsEmptiesTheDimension(t *testing.T) {
	m := memstore.New()
	e := newReactorEnvOn(t, syncOnly{Store: m, m: m})
	re, err := e.reactor().Observe(e.ctx, 429, header("retry-after-ms", "2000"), []byte(openAITPM429))
	if err != nil {
		t.Fatal(err)
	}
	if len(re.Cooled) != 1 || re.Cooled[0] != e.tpm {
		t.Fatalf("Cooled = %v, want [%s]", re.Cooled, e.tpm)
	}
	if s := e.state(t, e.tpm); s.Tokens != 0 || !s.CooldownUntil.IsZero() {
		t.Errorf("tpm after the 429: tokens %v, cooldown until %v; want 0 and none", s.Tokens, s.CooldownUntil)
	}
}

// A store with neither cooldowns nor Sync is left as it is by 429s and
// headers, with no error.
func TestReactorOnACoreOnlyStoreChangesNothing(t *testing.T) {
	e := newReactorEnvOn(t, coreOnly{memstore.New()})
	before := e.state(t, e.tpm).Tokens
	re, err := e.reactor().Observe(e.ctx, 429, header("retry-after-ms", "2000"), []byte(openAITPM429))
	if err != nil || len(re.Cooled) != 0 {
		t.Fatalf("Observe(429): Cooled %v, error %v; want nothing cooled, no error", re.Cooled, err)
	}
	h := header("x-ratelimit-limit-tokens", "60000", "x-ratelimit-remaining-tokens", "41000")
	re, err = e.reactor().Observe(e.ctx, 200, h, nil)
	if err != nil || len(re.Synced) != 0 {
		t.Fatalf("Observe(200): Synced %v, error %v; want nothing synced, no error", re.Synced, err)
	}
	if after := e.state(t, e.tpm).Tokens; after != before {
		t.Errorf("tpm = %v after the responses, want %v as before", after, before)
	}
}
