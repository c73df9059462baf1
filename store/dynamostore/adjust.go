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

// Adjust implements store.Store: a read of the bucket (and of the lease
// item when recorded), then a write conditioned on the bucket's version and
// the item's cost; a lost race reads again.
func (s *Store) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.Settlement{}, err
	}
	now := req.Now.UnixMilli()
	for n := 0; n < maxAdminAttempts; n++ {
		if err := backoff(ctx, n); err != nil {
			return store.Settlement{}, err
		}
		bis, err := s.readBuckets(ctx, []string{req.Dimension})
		if err != nil {
			return store.Settlement{}, err
		}
		bi := bis[0]
		if err := bi.b.CheckAdjustable(); err != nil {
			return store.Settlement{}, err
		}
		held := req.Held
		expired := !req.Recorded && !req.ExpiresAt.IsZero() && req.ExpiresAt.UnixMilli() <= now
		var li *leaseItem
		if req.Recorded {
			lis, err := s.loadLease(ctx, req.ID.String(), []string{req.Dimension})
			if err != nil {
				return store.Settlement{}, err
			}
			if len(lis) == 0 {
				dims, err := s.findDims(ctx, req.ID)
				if err != nil {
					return store.Settlement{}, err
				}
				if dims == nil {
					return store.Settlement{}, store.ErrUnknownLease
				}
				if all, err := s.loadLease(ctx, req.ID.String(), dims); err != nil || len(all) == 0 {
					if err == nil {
						err = store.ErrUnknownLease
					}
					return store.Settlement{}, err
				}
				return store.Settlement{}, &bucket.FieldError{Field: "dimension", Value: req.Dimension, Reason: "is not part of lease " + req.ID.String()}
			}
			li = lis[0]
			held = li.cost
			expired = li.expires <= now
		}
		// Late usage is charged (it counted at the vendor); only a refund
		// on an expired lease is refused.
		if req.Delta < 0 && expired {
			return store.Settlement{}, store.ErrLeaseExpired
		}
		if _, err := store.AdjustHeld(req.Dimension, held, req.Delta); err != nil {
			return store.Settlement{}, err
		}
		al := bi.st
		at, _ := bucket.Align(bi.lim, al, now, s.skew)
		st, applied := bucket.Adjust(bi.lim, al, at, req.Delta*bucket.Milli)
		newHeld := store.HeldAfter(held, req.Delta, applied)
		out := store.Settlement{Held: newHeld, Applied: applied, Remaining: st.Tokens}
		if li == nil {
			ok, _, err := s.writeDelta(ctx, bi, st, s.deltaToken(), "adjust")
			s.forget(bi.b.Name)
			if err != nil {
				return store.Settlement{}, err
			}
			if ok {
				return out, nil
			}
			continue
		}
		s.forget(bi.b.Name)
		tok := requestToken(req.ID, -2, int64(rand.Uint64()>>1))
		tx := []types.TransactWriteItem{
			{Update: s.bucketUpdate(bi, st, tok, "", holder{})},
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
			return out, nil
		}
		if !anyCCF(err) {
			return store.Settlement{}, classify("adjust", err)
		}
	}
	return store.Settlement{}, store.ErrContention
}
