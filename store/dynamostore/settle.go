package dynamostore

import (
	"context"
	"math/rand/v2"
	"time"

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
		al, at := bucket.Align(bi.lim, bi.st, now, s.skew)
		st, applied := bucket.Adjust(bi.lim, al, at, req.Delta*bucket.Milli)
		newHeld := store.HeldAfter(held, req.Delta, applied)
		out := store.Settlement{Held: newHeld, Applied: applied, Remaining: st.Tokens}
		if li == nil {
			ok, err := s.writeState(ctx, bi, st, "adjust")
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

func anyCCF(err error) bool {
	for _, r := range reasons(err) {
		if reasonIs(r, "ConditionalCheckFailed") {
			return true
		}
	}
	return false
}

// Leases implements store.Store with a consistent Scan of the lease items,
// grouped by lease id.
func (s *Store) Leases(ctx context.Context, q store.LeaseQuery) ([]store.LeaseRecord, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	now := q.Now.UnixMilli()
	groups := map[string][]*leaseItem{}
	err = s.scan(ctx, "begins_with(#pk, :p)", nil, nil, func(item map[string]types.AttributeValue) (bool, error) {
		if li, ok := decodeLease(item); ok {
			groups[li.uuid] = append(groups[li.uuid], li)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	var out []store.LeaseRecord
	for uuid, lis := range groups {
		id, err := store.ParseLeaseID(uuid)
		if err != nil {
			continue // not a Sluice lease id; the Python and TypeScript SDKs use other forms
		}
		first := lis[0]
		order := first.dims
		l := store.LeaseRecord{ID: id, Caller: first.caller, CreatedAt: time.UnixMilli(first.created), ExpiresAt: time.UnixMilli(first.expires)}
		has := false
		for _, d := range order {
			for _, li := range lis {
				if li.dim == d {
					l.Items = append(l.Items, store.Item{Dimension: d, Cost: li.cost})
					has = has || d == q.Dimension
				}
			}
		}
		if q.ExpiredOnly && first.expires > now || q.Dimension != "" && !has {
			continue
		}
		out = append(out, l)
	}
	return out, nil
}
