package dynamostore

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Extend implements store.Store: the lease items' expiry and the buckets'
// holder entries move together, in one transaction. One consistent read
// fetches the lease items and their buckets; each bucket write is
// conditioned on the version read (and bumps it, like every other write of
// a bucket row) and on the entry existing. A bucket that no longer lists
// the lease (deleted, or re-created under the same name) is left alone and
// the records alone are extended.
func (s *Store) Extend(ctx context.Context, req store.ExtendRequest) (time.Time, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return time.Time{}, err
	}
	now := req.Now.UnixMilli()
	dims, err := s.findDims(ctx, req.ID)
	if err != nil {
		return time.Time{}, err
	}
	uuid := req.ID.String()
	exp := now + req.TTL.Milliseconds()
	pks := make([]string, 0, 2*len(dims))
	for _, d := range dims {
		pks = append(pks, store.LeasePrefix+d+"#"+uuid)
	}
	for _, d := range dims {
		if !slices.Contains(pks, d) {
			pks = append(pks, d)
		}
	}
	pks = append(pks, indexPK(req.ID))
	for n := 0; n < maxAdminAttempts; n++ {
		if err := backoff(ctx, n); err != nil {
			return time.Time{}, err
		}
		items, err := s.getItems(ctx, pks)
		if err != nil {
			return time.Time{}, err
		}
		var lis []*leaseItem
		for _, pk := range pks[:len(dims)] {
			if it := items[pk]; it != nil {
				if li, ok := decodeLease(it); ok {
					lis = append(lis, li)
				}
			}
		}
		if len(lis) == 0 {
			return time.Time{}, store.ErrUnknownLease
		}
		tx := make([]types.TransactWriteItem, 0, 2*len(lis))
		for _, li := range lis {
			if li.expires <= now {
				return time.Time{}, store.ErrLeaseExpired
			}
			tx = append(tx, types.TransactWriteItem{Update: &types.Update{
				TableName: aws.String(s.table), Key: key(li.pk),
				UpdateExpression:         aws.String("SET #exp = :e, #ttl = :ttl"),
				ConditionExpression:      aws.String("attribute_exists(#pk) AND #exp = :old"),
				ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#exp": attrExpiresMs, "#ttl": attrTTL},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":e": numInt(exp), ":ttl": numInt((exp + 999) / 1000), ":old": numInt(li.expires)},
			}})
		}
		if items[indexPK(req.ID)] != nil {
			tx = append(tx, types.TransactWriteItem{Update: &types.Update{
				TableName: aws.String(s.table), Key: key(indexPK(req.ID)),
				UpdateExpression:          aws.String("SET #exp = :e"),
				ConditionExpression:       aws.String("attribute_exists(#pk)"),
				ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#exp": attrExpiresMs},
				ExpressionAttributeValues: map[string]types.AttributeValue{":e": numInt(exp)},
			}})
		}
		parts := []int64{-3, s.nonce, int64(rand.Uint64() >> 1)}
		for _, li := range lis {
			row := items[li.dim]
			if row == nil {
				continue // deleted: the records alone
			}
			bi, err := decodeBucket(row)
			if err != nil {
				return time.Time{}, err
			}
			if _, holds := bi.holders[uuid]; !holds || li.hasInc && bi.inc != li.inc {
				continue // not this lease's bucket any more
			}
			// The whole entry is rewritten: a concurrent one keeps its cost
			// (fixed: concurrent items cannot be adjusted). The write
			// touches this lease's entry alone, so it is conditioned on the
			// entry and the incarnation, not on the version: renewals do not
			// race the bucket's other writers (it still bumps the version,
			// like every write of a bucket row).
			h := holder{exp: exp, cost: li.cost, hasCost: li.typ == bucket.Concurrent.String()}
			names := map[string]string{"#h": attrHolders, "#id": uuid, "#ver": attrVersion, "#inc": attrInc}
			vals := map[string]types.AttributeValue{":e": h.value(), ":one": numInt(1)}
			tx = append(tx, types.TransactWriteItem{Update: &types.Update{
				TableName: aws.String(s.table), Key: key(li.dim),
				UpdateExpression:          aws.String("SET #h.#id = :e ADD #ver :one"),
				ConditionExpression:       aws.String(incCond(bi, vals) + " AND attribute_exists(#h.#id)"),
				ExpressionAttributeNames:  names,
				ExpressionAttributeValues: vals,
			}})
			parts = append(parts, bi.version)
		}
		// A fresh nonce per attempt: an SDK retry of this attempt is
		// idempotent; a new attempt, after a lost race, is a new request.
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: tx, ClientRequestToken: aws.String(requestToken(req.ID, parts...)),
		}, opts)
		for _, li := range lis {
			s.forget(li.dim)
		}
		if err == nil {
			return time.UnixMilli(exp), nil
		}
		if !anyCCF(err) {
			return time.Time{}, classify("extend", err)
		}
	}
	return time.Time{}, store.ErrContention
}
