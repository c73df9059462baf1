package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

func isCCF(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// state is a row's state at now, aligned with maximum skew skew (see
// bucket.Align).
func (bi *bucketItem) state(now, skew int64) store.BucketState {
	al := bi.st
	at, _ := bucket.Align(bi.lim, al, now, skew)
	r := bucket.Refill(bi.lim, al, at)
	bs := store.BucketState{Bucket: bi.b, Tokens: r.Tokens, LastRefill: r.Last, CooldownUntil: r.Until,
		ReservedUntil: r.Reserved, Charged: r.Charged, Waiters: bi.live(now), ActiveLeases: len(bi.holders), Now: time.UnixMilli(now)}
	if x := bi.earliest(); x != 0 {
		bs.NextExpiry = time.UnixMilli(x)
	}
	return bs
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

// writeState writes st to bi's row conditioned on its version; false means
// the condition failed (a concurrent write), and the row is forgotten.
func (s *Store) writeState(ctx context.Context, bi *bucketItem, st bucket.State, op string) (bool, error) {
	defer s.forget(bi.b.Name)
	ok, _, err := s.writeRow(ctx, bi, st, opToken(op), op)
	return ok, err
}

// writeRow writes st to bi's row conditioned on its version, recording tok
// in last_op. It returns true when the write was applied, and otherwise
// the row as it is now (nil when it was deleted), from which the caller
// can decide again without another read.
//
// The callers apply a delta to the state they read (a refund, a penalty),
// so the write must take effect at most once per call. An UpdateItem has no
// idempotency token: when one is applied but its response is lost (or a 5xx
// comes back), the SDK sends it again and the version condition fails. Each
// attempt therefore records a token of its own in last_op and asks for the
// row on a failed condition: a row at version+1 carrying that token is this
// very write, already applied, and counts as success rather than as a lost
// race (which would decide again and apply the delta a second time).
func (s *Store) writeRow(ctx context.Context, bi *bucketItem, st bucket.State, tok, op string) (bool, *bucketItem, error) {
	return s.writeUpdate(ctx, bi, s.bucketUpdate(bi, st, tok, "", holder{}), tok, op)
}

// writeUpdate sends up, an update of bi's row that records tok in last_op,
// as one UpdateItem, with writeRow's outcomes.
func (s *Store) writeUpdate(ctx context.Context, bi *bucketItem, up *types.Update, tok, op string) (bool, *bucketItem, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: up.TableName, Key: up.Key, UpdateExpression: up.UpdateExpression,
		ConditionExpression: up.ConditionExpression, ExpressionAttributeNames: up.ExpressionAttributeNames,
		ExpressionAttributeValues:           up.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, opts)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if ccf.Item == nil {
			return false, nil, nil // deleted: the next read reports it
		}
		cur, derr := decodeBucket(ccf.Item)
		if derr != nil {
			return false, nil, derr
		}
		if cur.lastOp == tok && cur.version == bi.version+1 && cur.inc == bi.inc {
			return true, nil, nil
		}
		return false, cur, nil
	}
	return err == nil, nil, classify(op, err)
}

// writeDelta is writeRow for a state that applies a change to the row as
// read (a refund, a penalty), which must never be applied twice: the
// update goes as a one-item TransactWriteItems with a ClientRequestToken
// unique to the attempt, which DynamoDB applies at most once however often
// the SDK sends it (for 10 minutes). writeRow's last_op recognises a resend
// only while no other write got in after it; a resend whose condition
// failed on a row another writer changed since would otherwise be taken
// for a lost race, decided again and applied a second time.
func (s *Store) writeDelta(ctx context.Context, bi *bucketItem, st bucket.State, tok, op string) (bool, *bucketItem, error) {
	up := s.bucketUpdate(bi, st, tok, "", holder{})
	up.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Update: up}}, ClientRequestToken: aws.String(tok),
	}, opts)
	if err == nil {
		return true, nil, nil
	}
	if rs := reasons(err); len(rs) == 1 && reasonIs(rs[0], "ConditionalCheckFailed") {
		if rs[0].Item == nil {
			return false, nil, nil // deleted: the next read reports it
		}
		cur, derr := decodeBucket(rs[0].Item)
		if derr != nil {
			return false, nil, derr
		}
		return false, cur, nil
	}
	return false, nil, classify(op, err)
}

// update applies up, reporting a failed condition as lost. With once, it
// goes as a one-item TransactWriteItems with a token of its own, so that
// an SDK resend of the applied update is not decided again on a row
// another writer changed meanwhile (a reset would fill the bucket twice);
// otherwise as an UpdateItem.
func (s *Store) update(ctx context.Context, up *types.Update, once bool) (lost bool, err error) {
	if !once {
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: up.TableName, Key: up.Key, UpdateExpression: up.UpdateExpression,
			ConditionExpression: up.ConditionExpression, ExpressionAttributeNames: up.ExpressionAttributeNames,
			ExpressionAttributeValues: up.ExpressionAttributeValues,
		}, opts)
		return isCCF(err), err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Update: up}}, ClientRequestToken: aws.String(s.deltaToken()),
	}, opts)
	rs := reasons(err)
	return len(rs) == 1 && reasonIs(rs[0], "ConditionalCheckFailed"), err
}

// deltaToken returns a token unique to one write attempt, for writeDelta:
// a ClientRequestToken (at most 36 characters) recorded in last_op.
func (s *Store) deltaToken() string { return requestToken(store.NewLeaseID(), s.nonce) }

// opToken returns a token unique to one write attempt of operation op, for
// last_op.
func opToken(op string) string {
	return op + ":" + store.NewLeaseID().String()
}

func anyCCF(err error) bool {
	for _, r := range reasons(err) {
		if reasonIs(r, "ConditionalCheckFailed") {
			return true
		}
	}
	return false
}
