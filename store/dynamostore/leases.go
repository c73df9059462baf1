package dynamostore

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// leaseItem is one decoded lease item (one dimension of a lease).
type leaseItem struct {
	pk, dim, uuid string
	cost          int64
	created       int64 // ms
	expires       int64 // ms
	caller        string
	inc           string
	hasInc        bool   // written by Sluice on a bucket with an incarnation
	typ           string // limit_type, when Sluice wrote the item
	dims          []string
	index         bool // an index item (see indexPK), not a lease item
}

// decodeLease reads a lease item written by Sluice or by the Python and TypeScript SDKs
// (which write no lease_id, dims, expires_ms or created_ms: the uuid comes
// from the key and the expiry from ttl).
func decodeLease(item map[string]types.AttributeValue) (*leaseItem, bool) {
	pk, _ := getS(item, attrPK)
	dim, uuid, ok := parseLeasePK(pk)
	if !ok {
		return nil, false
	}
	li := &leaseItem{pk: pk, dim: dim, uuid: uuid}
	if d, ok := getS(item, attrDimension); ok {
		li.dim = d
	}
	if id, ok := getS(item, attrLeaseID); ok {
		li.uuid = id
	}
	if v, ok := getN(item, attrSlotCost); ok {
		li.cost, _ = parseInt(v)
	} else if v, ok := getN(item, attrLeaseCost); ok {
		li.cost, _ = parseInt(v)
	}
	if v, ok := getN(item, attrExpiresMs); ok {
		li.expires, _ = strconv.ParseInt(v, 10, 64)
	} else if v, ok := getN(item, attrTTL); ok {
		li.expires, _ = parseMilliCeil(v)
	}
	if v, ok := getN(item, attrCreatedMs); ok {
		li.created, _ = strconv.ParseInt(v, 10, 64)
	} else if v, ok := getN(item, attrCreated); ok {
		li.created, _ = parseMilli(v)
	}
	li.caller, _ = getS(item, attrCaller)
	li.inc, li.hasInc = getS(item, attrInc)
	li.typ, _ = getS(item, attrType)
	if l, ok := item[attrDims].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			if s, ok := v.(*types.AttributeValueMemberS); ok {
				li.dims = append(li.dims, s.Value)
			}
		}
	}
	if len(li.dims) == 0 {
		li.dims = []string{li.dim}
	}
	return li, true
}

// findDims returns a lease's dimensions: from this process's cache, else
// from its index item (one read), else, for a lease written before index
// items existed, from a consistent Scan for its items.
func (s *Store) findDims(ctx context.Context, id store.LeaseID) ([]string, error) {
	if d := s.leaseDims(id); d != nil {
		return d, nil
	}
	items, err := s.getItems(ctx, []string{indexPK(id)})
	if err != nil {
		return nil, err
	}
	if it := items[indexPK(id)]; it != nil {
		if li, ok := decodeIndex(it); ok {
			return li.dims, nil
		}
	}
	// A lease written before index items existed.
	uuid := id.String()
	var dims []string
	err = s.scan(ctx, "begins_with(#pk, :p) AND #id = :id", map[string]string{"#id": attrLeaseID},
		map[string]types.AttributeValue{":id": str(uuid)}, func(item map[string]types.AttributeValue) (bool, error) {
			if li, ok := decodeLease(item); ok {
				dims = li.dims
				return false, nil
			}
			return true, nil
		})
	return dims, err
}

// loadLease reads a lease's items consistently, in the order of dims;
// dimensions whose item is gone are skipped.
func (s *Store) loadLease(ctx context.Context, uuid string, dims []string) ([]*leaseItem, error) {
	pks := make([]string, len(dims))
	for i, d := range dims {
		pks[i] = store.LeasePrefix + d + "#" + uuid
	}
	items, err := s.getItems(ctx, pks)
	if err != nil {
		return nil, err
	}
	var out []*leaseItem
	for _, pk := range pks {
		if it := items[pk]; it != nil {
			if li, ok := decodeLease(it); ok {
				out = append(out, li)
			}
		}
	}
	return out, nil
}

// Release implements store.Store. When DynamoDB's TTL process has deleted
// some or all of the lease's items, the slots their buckets still list in
// holders are restored from there (see remove); the lease's dimensions are
// then known only from an item that is left or from this process's cache.
func (s *Store) Release(ctx context.Context, req store.ReleaseRequest) (store.ReleaseResult, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.ReleaseResult{}, err
	}
	dims, err := s.findDims(ctx, req.ID)
	if err != nil || dims == nil {
		return store.ReleaseResult{}, err
	}
	lis, err := s.loadLease(ctx, req.ID.String(), dims)
	if err != nil {
		return store.ReleaseResult{}, err
	}
	r, err := s.remove(ctx, req.ID.String(), dims, lis, 0)
	if err != nil {
		return store.ReleaseResult{}, err
	}
	s.forgetLease(req.ID)
	if !r.ok {
		return store.ReleaseResult{}, nil
	}
	return store.ReleaseResult{Released: true, Restored: r.restored}, nil
}

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
