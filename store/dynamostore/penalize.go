package dynamostore

import (
	"context"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Penalize implements store.Store in one UpdateItem conditioned on the
// version of the row it was decided on (see rewrite): a concurrent write
// makes it decide again, so no penalty and no acquisition is ever lost.
func (s *Store) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	var res store.Penalty
	check := func(b *store.Bucket) error { return b.CheckPenalizable() }
	err := s.rewrite(ctx, req.Now.UnixMilli(), req.Dimension, "penalize", check, func(bi *bucketItem, al bucket.State, at int64) bucket.State {
		st := bucket.Penalize(bi.lim, al, at, req.FactorMilli)
		res = store.Penalty{Before: bucket.Available(bi.lim, al, at), After: st.Tokens}
		return st
	})
	if err != nil {
		return store.Penalty{}, err
	}
	return res, nil
}

// rewrite is the read-modify-write of Penalize, Cooldown and Sync on one
// bucket row: f computes the new state from the row aligned with now
// (bucket.Align, the decision time at), and the state is written in one
// UpdateItem conditioned on the version, the incarnation and the tokens of
// the row it was computed from (versionCond). f may run more than once;
// only the last run's state is written.
//
// The row is the one the fast path remembers, if any, so that a warm
// bucket takes one round trip; otherwise it is read consistently first. A
// lost condition returns the current row (ALL_OLD), from which f decides
// again without another read, after a jittered backoff. A remembered row
// is never trusted for an answer that writes nothing: a state that f
// leaves unchanged, or a failed check, is decided again on a fresh read.
// The written row is remembered.
func (s *Store) rewrite(ctx context.Context, now int64, dim, op string, check func(*store.Bucket) error, f func(bi *bucketItem, al bucket.State, at int64) bucket.State) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	bi, fresh := s.cached(dim), false
	for lost := 0; lost < maxAdminAttempts; {
		if bi == nil {
			bis, err := s.readBuckets(ctx, []string{dim})
			if err != nil {
				s.forget(dim)
				return err
			}
			bi, fresh = bis[0], true
		}
		if err := check(&bi.b); err != nil {
			if !fresh {
				bi = nil
				continue
			}
			return err
		}
		al := bi.st
		at, _ := bucket.Align(bi.lim, al, now, s.skew)
		st := f(bi, al, at)
		if st == bi.st {
			if fresh {
				return nil // nothing to write
			}
			bi = nil
			continue
		}
		if err := backoff(ctx, lost); err != nil {
			return err
		}
		var tok string
		var ok bool
		var cur *bucketItem
		if op == "penalize" || op == "cancel" {
			// A penalty multiplies the balance as read and a cancellation
			// gives tokens back: sent twice by the SDK, each must still
			// apply once (see writeDelta). A cooldown or a sync decided
			// again on a changed row lowers the balance it finds, as
			// once would have.
			tok = s.deltaToken()
			ok, cur, err = s.writeDelta(ctx, bi, st, tok, op)
		} else {
			tok = opToken(op)
			ok, cur, err = s.writeRow(ctx, bi, st, tok, op)
		}
		if err != nil {
			s.forget(dim)
			return err
		}
		if ok {
			nb := *bi
			nb.st, nb.version, nb.lastOp, nb.rawTok = st, bi.version+1, tok, formatMilli(st.Tokens)
			s.remember(&nb)
			return nil
		}
		if fresh {
			lost++ // a remembered row that was stale is no race
		}
		bi, fresh = cur, cur != nil
	}
	s.forget(dim)
	return store.ErrContention
}
