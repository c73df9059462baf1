package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// maxAdminAttempts bounds the read-modify-write loops of administrative
// operations and lease settlement under contention; each loop is also
// bounded by the operation's timeout.
const maxAdminAttempts = 1000

// Backoff between attempts of a read-modify-write loop: full jitter,
// uniformly random in [0, min(backoffCap, backoffBase·2^n)).
const (
	backoffBase = 5 * time.Millisecond
	backoffCap  = 200 * time.Millisecond
)

// backoff waits before attempt n of a read-modify-write loop (not before
// the first). The wait is random (full jitter): writers that lost a race on
// one bucket row do not come back in lockstep to lose it again. Attempts
// come after a lost race, so when ctx ends first the outcome is
// store.ErrContention (the table is answering), wrapping ctx's error.
func backoff(ctx context.Context, n int) error {
	if n == 0 {
		return nil
	}
	ceil := backoffCap
	if n < 6 {
		ceil = min(backoffCap, backoffBase<<n)
	}
	t := time.NewTimer(rand.N(ceil))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w: dynamostore: %d attempts lost a race: %w", store.ErrContention, n, ctx.Err())
	case <-t.C:
		return nil
	}
}

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
			item := encodeBucket(b, bucket.State{Tokens: lim.Capacity, Last: ms}, 1, store.NewLeaseID().String(), nil)
			_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String(s.table), Item: item,
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": attrPK},
			}, opts)
			if isCCF(err) {
				continue
			}
			return classify("put bucket", err)
		}
		old, err := decodeBucket(items[b.Name])
		if err != nil {
			return err
		}
		if err := store.CheckTypeChange(old.b, b); err != nil {
			return err
		}
		// (A concurrent reconfigure applied twice by an SDK retry is
		// harmless: the second read sees the new capacity, a zero change.)
		al, at := bucket.Align(old.lim, old.st, ms, s.skew)
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
		if !old.hasMap {
			names["#h"], vals[":hm"] = attrHolders, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
			set = append(set, "#h = :hm")
		}
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.table), Key: key(b.Name),
			UpdateExpression:          aws.String("SET " + strings.Join(set, ", ") + " ADD #ver :one"),
			ConditionExpression:       aws.String(versionCond(old, names, vals)),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: vals,
		}, opts)
		if isCCF(err) {
			continue
		}
		return classify("put bucket", err)
	}
	return store.ErrContention
}

func isCCF(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
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
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table), Key: key(name),
		ConditionExpression:      aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
	}, opts)
	if isCCF(err) {
		return &store.ConfigurationError{Dimension: name}
	}
	return classify("delete bucket", err)
}

// state is a row's state at now, aligned with maximum skew skew (see
// bucket.Align).
func (bi *bucketItem) state(now, skew int64) store.BucketState {
	al, at := bucket.Align(bi.lim, bi.st, now, skew)
	r := bucket.Refill(bi.lim, al, at)
	bs := store.BucketState{Bucket: bi.b, Tokens: r.Tokens, LastRefill: r.Last, ActiveLeases: len(bi.holders), Now: time.UnixMilli(now)}
	if x := bi.earliest(); x != 0 {
		bs.NextExpiry = time.UnixMilli(x)
	}
	return bs
}

// Peek implements store.Store: one consistent read (GetItem or
// BatchGetItem) of the named rows.
func (s *Store) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	ms, dimensions := req.Now.UnixMilli(), req.Dimensions
	bis, err := s.readBuckets(ctx, dimensions)
	if err != nil {
		return nil, err
	}
	out := make([]store.BucketState, len(bis))
	for i, bi := range bis {
		out[i] = bi.state(ms, s.skew)
	}
	return out, nil
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

// scan runs a consistent, paginated Scan with filter (":p" is bound to the
// lease prefix and "#pk" to the key) and calls f on every item until f
// returns false.
func (s *Store) scan(ctx context.Context, filter string, names map[string]string, vals map[string]types.AttributeValue, f func(map[string]types.AttributeValue) (bool, error)) error {
	n := map[string]string{"#pk": attrPK}
	for k, v := range names {
		n[k] = v
	}
	v := map[string]types.AttributeValue{":p": str(store.LeasePrefix)}
	for k, x := range vals {
		v[k] = x
	}
	in := &dynamodb.ScanInput{
		TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		FilterExpression: aws.String(filter), ExpressionAttributeNames: n, ExpressionAttributeValues: v,
		Limit: aws.Int32(1000),
	}
	p := dynamodb.NewScanPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx, opts)
		if err != nil {
			return classify("scan", err)
		}
		for _, item := range page.Items {
			more, err := f(item)
			if err != nil || !more {
				return err
			}
		}
	}
	return nil
}

// Penalize implements store.Store: a read, then an UpdateItem conditioned
// on the version that was read (a concurrent write makes it retry, so no
// penalty and no acquisition is ever lost).
func (s *Store) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.Penalty{}, err
	}
	now := req.Now.UnixMilli()
	for n := 0; n < maxAdminAttempts; n++ {
		if err := backoff(ctx, n); err != nil {
			return store.Penalty{}, err
		}
		bis, err := s.readBuckets(ctx, []string{req.Dimension})
		if err != nil {
			return store.Penalty{}, err
		}
		bi := bis[0]
		if err := bi.b.CheckPenalizable(); err != nil {
			return store.Penalty{}, err
		}
		al, at := bucket.Align(bi.lim, bi.st, now, s.skew)
		before := bucket.Available(bi.lim, al, at)
		st := bucket.Penalize(bi.lim, al, at, req.FactorMilli)
		ok, err := s.writeState(ctx, bi, st, "penalize")
		if err != nil {
			return store.Penalty{}, err
		}
		if ok {
			return store.Penalty{Before: before, After: st.Tokens}, nil
		}
	}
	return store.Penalty{}, store.ErrContention
}

// writeState writes st to bi's row conditioned on its version; false means
// the condition failed (a concurrent write), and the row is forgotten.
//
// The callers apply a delta to the state they read (a refund, a penalty),
// so the write must take effect at most once per call. An UpdateItem has no
// idempotency token: when one is applied but its response is lost (or a 5xx
// comes back), the SDK sends it again and the version condition fails. Each
// attempt therefore records a token of its own in last_op and asks for the
// row on a failed condition: a row at version+1 carrying that token is this
// very write, already applied, and counts as success rather than as a lost
// race (which would read again and apply the delta a second time).
func (s *Store) writeState(ctx context.Context, bi *bucketItem, st bucket.State, op string) (bool, error) {
	defer s.forget(bi.b.Name)
	tok := opToken(op)
	up := s.bucketUpdate(bi, st, tok, "", holder{})
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: up.TableName, Key: up.Key, UpdateExpression: up.UpdateExpression,
		ConditionExpression: up.ConditionExpression, ExpressionAttributeNames: up.ExpressionAttributeNames,
		ExpressionAttributeValues:           up.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, opts)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if ccf.Item == nil {
			return false, nil // deleted: the next read reports it
		}
		cur, derr := decodeBucket(ccf.Item)
		if derr != nil {
			return false, derr
		}
		return cur.lastOp == tok && cur.version == bi.version+1 && cur.inc == bi.inc, nil
	}
	return err == nil, classify(op, err)
}

// opToken returns a token unique to one write attempt of operation op, for
// last_op.
func opToken(op string) string {
	return op + ":" + store.NewLeaseID().String()
}
