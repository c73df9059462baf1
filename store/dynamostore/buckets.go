package dynamostore

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// PutBucket implements store.Store.
func (s *Store) PutBucket(ctx context.Context, req store.PutBucketRequest) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	ms, b, reset := req.Now.UnixMilli(), req.Bucket, req.Reset
	lim := b.Config.Limits()
	defer s.forget(b.Name)
	for n := 0; n < maxAdminAttempts; n++ {
		if err := backoff(ctx, n); err != nil {
			return err
		}
		items, err := s.getItems(ctx, []string{b.Name})
		if err != nil {
			return err
		}
		if items[b.Name] == nil {
			if err := store.PutConflict(req, false, bucket.Config{}); err != nil {
				return err
			}
			item := encodeBucket(b, bucket.State{Tokens: req.StartTokens(), Last: ms}, 1, store.NewLeaseID().String(), nil)
			_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String(s.table), Item: item,
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": attrPK},
			}, opts)
			if isCCF(err) {
				if req.IfAbsent { // another writer created it first
					return &store.ConflictError{Dimension: b.Name, Found: true}
				}
				continue
			}
			return classify("put bucket", err)
		}
		old, err := decodeBucket(items[b.Name])
		if err != nil {
			return err
		}
		// The update below is conditional on the version read, so the
		// configuration checked here is the one it changes.
		if err := store.PutConflict(req, true, old.b.Config); err != nil {
			return err
		}
		if err := store.CheckTypeChange(old.b, b); err != nil {
			return err
		}
		// (A concurrent reconfigure applied twice by an SDK retry is
		// harmless: the second read sees the new capacity, a zero change.)
		al := old.st
		at, _ := bucket.Align(old.lim, al, ms, s.skew)
		st := bucket.Reconfigure(old.lim, lim, al, at, reset)
		full := encodeBucket(b, st, 0, "", nil)
		names := map[string]string{"#ver": attrVersion, "#inc": attrInc}
		vals := map[string]types.AttributeValue{":v": numInt(old.version), ":one": numInt(1)}
		set := make([]string, 0, 12)
		for _, a := range []string{attrCapacity, attrTokens, attrRate, attrLast, attrCost, attrType, attrAmount, attrPeriod, attrMaxDebt} {
			k := "#a" + itoa(len(set))
			names[k], vals[":"+k[1:]] = a, full[a]
			set = append(set, k+" = :"+k[1:])
		}
		var rem []string
		set, rem = optUpdate(attrUntil, "cu", old.st.Until, st.Until, names, vals, set, rem)
		set, rem = optUpdate(attrReserved, "ru", old.st.Reserved, st.Reserved, names, vals, set, rem)
		if !old.hasMap {
			names["#h"], vals[":hm"] = attrHolders, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
			set = append(set, "#h = :hm")
		}
		lost, err := s.update(ctx, &types.Update{
			TableName: aws.String(s.table), Key: key(b.Name),
			UpdateExpression:          aws.String(updateExpr(set, rem)),
			ConditionExpression:       aws.String(versionCond(old, names, vals)),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: vals,
		}, reset)
		if lost {
			continue
		}
		return classify("put bucket", err)
	}
	return store.ErrContention
}

// DeleteBucket implements store.Store.
func (s *Store) DeleteBucket(ctx context.Context, req store.DeleteBucketRequest) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	name := req.Name
	defer s.forget(name)
	// A one-item transaction, not a DeleteItem: its token makes an SDK
	// resend of an applied deletion succeed, where the resent DeleteItem's
	// condition would fail and report the bucket it deleted as unknown.
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Delete: &types.Delete{
			TableName: aws.String(s.table), Key: key(name),
			ConditionExpression:      aws.String("attribute_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		}}},
		ClientRequestToken: aws.String(s.deltaToken()),
	}, opts)
	if rs := reasons(err); len(rs) == 1 && reasonIs(rs[0], "ConditionalCheckFailed") {
		return &store.ConfigurationError{Dimension: name}
	}
	return classify("delete bucket", err)
}

// ListBuckets implements store.Store with a consistent Scan of the rows
// that are not lease records.
func (s *Store) ListBuckets(ctx context.Context, req store.ListBucketsRequest) ([]store.BucketState, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	ms := req.Now.UnixMilli()
	var out []store.BucketState
	err = s.scan(ctx, "NOT begins_with(#pk, :p)", nil, nil, func(item map[string]types.AttributeValue) (bool, error) {
		bi, err := decodeBucket(item)
		if err != nil {
			return false, err
		}
		out = append(out, bi.state(ms, s.skew))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []store.BucketState{}
	}
	return out, nil
}
