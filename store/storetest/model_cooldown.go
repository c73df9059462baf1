package storetest

import (
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// coolable returns the time-based bucket a cooldown or a sync names, or
// the error a store returns: the request's own check first, then an
// unknown dimension, then a concurrent one.
func (m *model) coolable(check error, dimension, op string) (*mBucket, error) {
	if check != nil {
		return nil, check
	}
	b := m.buckets[dimension]
	if b == nil {
		return nil, unknownDimension(dimension)
	}
	if err := b.b.CheckCoolable(op); err != nil {
		return nil, err
	}
	return b, nil
}

// cooldown applies a "cooldown" step: the cooldown lasts st.CooldownMs
// from the decision time (see bucket.Align), and a running cooldown that
// ends later is kept.
func (m *model) cooldown(st Step, now int64) Expect {
	req := store.CooldownRequest{Now: time.UnixMilli(now), Dimension: st.Dimension, Until: time.UnixMilli(now + st.CooldownMs)}
	b, err := m.coolable(contract.Cooldown(req), st.Dimension, "cooldown")
	if err != nil {
		return fail(err)
	}
	s, at := m.aligned(b, now)
	before := bucket.Available(b.lim, s, at)
	b.st = bucket.Cooldown(b.lim, s, at, at+st.CooldownMs)
	return Expect{Before: before, After: b.st.Tokens, UntilMs: b.st.Until - m.base}
}

// sync applies a "sync" step: the balance is lowered to st.Remaining
// tokens, never raised.
func (m *model) sync(st Step, now int64) Expect {
	req := store.SyncRequest{Now: time.UnixMilli(now), Dimension: st.Dimension, Remaining: st.Remaining}
	b, err := m.coolable(contract.Sync(req), st.Dimension, "sync")
	if err != nil {
		return fail(err)
	}
	s, at := m.aligned(b, now)
	before := bucket.Available(b.lim, s, at)
	b.st = bucket.Sync(b.lim, s, at, st.Remaining*bucket.Milli)
	return Expect{Before: before, After: b.st.Tokens}
}
