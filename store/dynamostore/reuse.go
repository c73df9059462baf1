package dynamostore

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// A recorded lease also has an index item, lease#{uuid}, holding its
// lease_id, dims and expires_ms. Its key has no dimension, so the SDKs'
// SDKs (and Sluice versions before it) never read it as a lease item, and
// it has no ttl, so neither DynamoDB's TTL process nor the SDKs'
// reconciler deletes it. It is written, extended and deleted in the
// transactions that write, extend and delete the lease's items, and it is
// what makes a lease id unique across dimensions: a recorded acquisition
// puts it on the condition that it does not exist. It also finds a lease's
// dimensions with one read (Release and Extend from another process).

// indexPK is the key of lease id's index item.
func indexPK(id store.LeaseID) string { return store.LeasePrefix + id.String() }

// indexPut is the transaction item that writes the index of a lease on
// dims, expiring at expires, on the condition that the id is not in use.
func (s *Store) indexPut(id store.LeaseID, dims []string, expires int64) types.TransactWriteItem {
	l := make([]types.AttributeValue, len(dims))
	for i, d := range dims {
		l[i] = str(d)
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			attrPK: str(indexPK(id)), attrLeaseID: str(id.String()),
			attrDims: &types.AttributeValueMemberL{Value: l}, attrExpiresMs: numInt(expires),
		},
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": attrPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// indexAbsent is the transaction item of an acquisition that writes no
// record: a check that the lease id has no record (see WithUncheckedLeaseIDs).
func (s *Store) indexAbsent(id store.LeaseID) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(s.table), Key: key(indexPK(id)),
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": attrPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// indexDelete is the transaction item that deletes lease uuid's index
// item, if any.
func (s *Store) indexDelete(uuid string) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.table), Key: key(store.LeasePrefix + uuid)}}
}

// decodeIndex reads an index item: its uuid, dimensions and expiry.
func decodeIndex(item map[string]types.AttributeValue) (*leaseItem, bool) {
	pk, _ := getS(item, attrPK)
	uuid, ok := getS(item, attrLeaseID)
	if !ok || pk != store.LeasePrefix+uuid {
		return nil, false
	}
	li := &leaseItem{pk: pk, uuid: uuid, index: true}
	if v, ok := getN(item, attrExpiresMs); ok {
		li.expires, _ = strconv.ParseInt(v, 10, 64)
	}
	if l, ok := item[attrDims].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			if s, ok := v.(*types.AttributeValueMemberS); ok {
				li.dims = append(li.dims, s.Value)
			}
		}
	}
	return li, len(li.dims) > 0
}

// errRetry reports that a lease record seen in use was gone when replay
// read it: the acquisition is tried again.
var errRetry = errors.New("dynamostore: lease record gone; retry")

// replay answers an acquisition whose id already has a lease record: the
// grant it was when the record holds the same dimensions at the same costs
// (a retry), else store.ErrLeaseInUse. It changes nothing. costs are the
// request's resolved costs. It returns errRetry when the record is gone by
// the time it is read (released or reclaimed meanwhile).
//
// It also returns the record's first item, for a reservation's replay.
func (s *Store) replay(ctx context.Context, req *store.AcquireRequest, costs []int64, now int64, res *store.AcquireResult) (*leaseItem, error) {
	dims, err := s.findDimsNoScan(ctx, req)
	if err != nil {
		return nil, err
	}
	if dims == nil {
		return nil, errRetry
	}
	lis, err := s.loadLease(ctx, req.ID.String(), dims)
	if err != nil {
		return nil, err
	}
	if len(lis) == 0 {
		return nil, errRetry
	}
	record := make([]store.Item, len(lis))
	for i, li := range lis {
		record[i] = store.Item{Dimension: li.dim, Cost: li.cost}
	}
	asked := make([]store.Item, len(req.Items))
	for i, it := range req.Items {
		asked[i] = store.Item{Dimension: it.Dimension, Cost: costs[i]}
	}
	if len(lis) != len(dims) || !store.SameItems(record, asked) {
		return nil, store.LeaseInUse(req.ID)
	}
	bis, err := s.readBuckets(ctx, dimsOf(req))
	if err != nil {
		return nil, err
	}
	res.Granted, res.Recorded, res.RetryIn, res.Ahead = true, true, 0, 0
	res.ExpiresAt = time.UnixMilli(lis[0].expires)
	for i, bi := range bis {
		st := bi.st
		at, _ := bucket.Align(bi.lim, st, now, s.skew)
		res.Items[i] = store.ItemResult{Dimension: bi.b.Name, Type: bi.b.Type, Cost: costs[i], Capacity: bi.b.Capacity,
			Remaining: bucket.Available(bi.lim, st, at)}
	}
	return lis[0], nil
}

// findDimsNoScan returns the dimensions of req.ID's lease record from its
// index item, else from a lease item on one of the request's dimensions
// (a lease written before index items existed), else nil.
func (s *Store) findDimsNoScan(ctx context.Context, req *store.AcquireRequest) ([]string, error) {
	pks := []string{indexPK(req.ID)}
	for _, it := range req.Items {
		pks = append(pks, leasePK(it.Dimension, req.ID))
	}
	items, err := s.getItems(ctx, pks)
	if err != nil {
		return nil, err
	}
	if it := items[pks[0]]; it != nil {
		if li, ok := decodeIndex(it); ok {
			return li.dims, nil
		}
	}
	for _, pk := range pks[1:] {
		if it := items[pk]; it != nil {
			if li, ok := decodeLease(it); ok {
				return li.dims, nil
			}
		}
	}
	return nil, nil
}

// recorded reports whether lease id has an index item.
func (s *Store) recorded(ctx context.Context, id store.LeaseID) (bool, error) {
	items, err := s.getItems(ctx, []string{indexPK(id)})
	return items[indexPK(id)] != nil, err
}

func dimsOf(req *store.AcquireRequest) []string {
	out := make([]string, len(req.Items))
	for i, it := range req.Items {
		out[i] = it.Dimension
	}
	return out
}
