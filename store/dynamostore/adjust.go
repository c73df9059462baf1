package dynamostore

import (
	"context"
	"math/rand/v2"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// adjustEager is how many lost races Adjust answers with an immediate
// attempt, decided from the row the failed condition returned, before it
// backs off between attempts.
const adjustEager = 3

// Adjust implements store.Store: a write of the bucket row conditioned on
// its version (with, for a recorded lease, the lease item's cost,
// conditioned on the cost read), decided from the row this store last saw
// (read when it has none). A lost race decides again at once from the row
// the failed condition returned; after adjustEager of them, with a
// jittered backoff between attempts.
func (s *Store) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.Settlement{}, err
	}
	unlock, err := s.lockRows(ctx, []string{req.Dimension})
	defer unlock()
	if err != nil {
		return store.Settlement{}, err
	}
	now := req.Now.UnixMilli()
	bi := s.cached(req.Dimension)
	var li *leaseItem
	for n := 0; n < maxAdminAttempts; n++ {
		if err := backoff(ctx, max(n-adjustEager, 0)); err != nil {
			return store.Settlement{}, err
		}
		if bi == nil {
			bis, err := s.readBuckets(ctx, []string{req.Dimension})
			if err != nil {
				return store.Settlement{}, err
			}
			bi = bis[0]
		}
		if err := bi.b.CheckAdjustable(); err != nil {
			s.forget(bi.b.Name)
			return store.Settlement{}, err
		}
		if req.Recorded && li == nil {
			if li, err = s.adjustLease(ctx, req); err != nil {
				return store.Settlement{}, err
			}
		}
		out, cur, leaseMoved, done, err := s.adjustOnce(ctx, req, bi, li, now)
		if err != nil || done {
			return out, err
		}
		// Lost: decide again from the row as it is now (nil: read it), and
		// from the lease item as it is now when its cost moved.
		if bi = cur; cur == nil || leaseMoved {
			li = nil
		}
	}
	return store.Settlement{}, store.ErrContention
}

// adjustLease reads the item of recorded lease req.ID on req.Dimension:
// store.ErrUnknownLease when the lease has no record, a *bucket.FieldError
// when its record lacks the dimension.
func (s *Store) adjustLease(ctx context.Context, req store.AdjustRequest) (*leaseItem, error) {
	lis, err := s.loadLease(ctx, req.ID.String(), []string{req.Dimension})
	if err != nil {
		return nil, err
	}
	if len(lis) > 0 {
		return lis[0], nil
	}
	dims, err := s.findDims(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	if dims == nil {
		return nil, store.ErrUnknownLease
	}
	if all, err := s.loadLease(ctx, req.ID.String(), dims); err != nil || len(all) == 0 {
		if err == nil {
			err = store.ErrUnknownLease
		}
		return nil, err
	}
	return nil, &bucket.FieldError{Field: "dimension", Value: req.Dimension, Reason: "is not part of lease " + req.ID.String()}
}

// adjustOnce decides req on row bi (and lease item li, when recorded) and
// writes it. done reports the settlement made (or refused: err); when
// not done, cur is the row as the failed condition found it (nil when it
// must be read again), and leaseMoved reports that li's cost changed.
func (s *Store) adjustOnce(ctx context.Context, req store.AdjustRequest, bi *bucketItem, li *leaseItem, now int64) (out store.Settlement, cur *bucketItem, leaseMoved, done bool, err error) {
	held := req.Held
	expired := !req.Recorded && !req.ExpiresAt.IsZero() && req.ExpiresAt.UnixMilli() <= now
	if li != nil {
		held = li.cost
		expired = li.expires <= now
	}
	// Late usage is charged (it counted at the vendor); only a refund
	// on an expired lease is refused.
	if req.Delta < 0 && expired {
		return store.Settlement{}, nil, false, true, store.ErrLeaseExpired
	}
	if _, err := store.AdjustHeld(req.Dimension, held, req.Delta); err != nil {
		return store.Settlement{}, nil, false, true, err
	}
	al := bi.st
	at, _ := bucket.Align(bi.lim, al, now, s.skew)
	st, applied := bucket.Adjust(bi.lim, al, at, req.Delta*bucket.Milli)
	newHeld := store.HeldAfter(held, req.Delta, applied)
	out = store.Settlement{Held: newHeld, Applied: applied, Remaining: st.Tokens}
	if li == nil {
		tok := s.deltaToken()
		ok, cur, err := s.writeDelta(ctx, bi, st, tok, "adjust")
		switch {
		case err != nil:
			s.forget(bi.b.Name)
			return store.Settlement{}, nil, false, true, err
		case ok:
			s.rememberWritten(bi, st, tok)
			return out, nil, false, true, nil
		}
		s.forget(bi.b.Name)
		return store.Settlement{}, cur, false, false, nil
	}
	tok := requestToken(req.ID, -2, int64(rand.Uint64()>>1))
	up := s.bucketUpdate(bi, st, tok, "", holder{})
	up.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	tx := []types.TransactWriteItem{
		{Update: up},
		{Update: &types.Update{
			TableName: aws.String(s.table), Key: key(li.pk),
			UpdateExpression:          aws.String("SET #c = :c"),
			ConditionExpression:       aws.String("#c = :old"),
			ExpressionAttributeNames:  map[string]string{"#c": attrLeaseCost},
			ExpressionAttributeValues: map[string]types.AttributeValue{":c": numInt(newHeld), ":old": numInt(li.cost)},
		}},
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx, ClientRequestToken: aws.String(tok)}, opts)
	if err == nil {
		s.rememberWritten(bi, st, tok)
		return out, nil, false, true, nil
	}
	s.forget(bi.b.Name)
	rs := reasons(err)
	if !anyCCF(err) {
		return store.Settlement{}, nil, false, true, classify("adjust", err)
	}
	if len(rs) > 0 && reasonIs(rs[0], "ConditionalCheckFailed") && rs[0].Item != nil {
		cur, derr := decodeBucket(rs[0].Item)
		if derr != nil {
			return store.Settlement{}, nil, false, true, derr
		}
		return store.Settlement{}, cur, len(rs) > 1 && reasonIs(rs[1], "ConditionalCheckFailed"), false, nil
	}
	// The row is gone: read both again.
	return store.Settlement{}, nil, true, false, nil
}

// rememberWritten remembers bi's row as a write of state st, recorded
// with tok, left it: one version up (see rowUpdate).
func (s *Store) rememberWritten(bi *bucketItem, st bucket.State, tok string) {
	nb := *bi
	nb.st, nb.version, nb.lastOp, nb.rawTok = st, bi.version+1, tok, formatMilli(st.Tokens)
	s.remember(&nb)
}
