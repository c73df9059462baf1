package dynamostore

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// removal is the outcome of removing one lease.
type removal struct {
	ok       bool // this call deleted the records or holder entries
	orphan   bool // none of the lease's buckets exists any more
	restored []store.Restored
	live     []string // dimensions whose bucket (same incarnation) exists
}

// Kinds of the items of a removal transaction, to read its cancellation
// reasons.
const (
	txDelete = iota // a lease item, conditioned on existing
	txGone          // a check that a lease item no longer exists
	txBucket        // a bucket update
	txIndex         // the lease's index item, deleted unconditionally
)

// removeTx is one attempt's transaction and what it would report.
type removeTx struct {
	items []types.TransactWriteItem
	kinds []int
	r     removal
	parts []int64 // request token parts
}

// remove deletes a lease's items (lis, the ones that exist) and returns its
// concurrent costs to their buckets, in one transaction. Each lease delete
// is conditioned on the item existing, and each holder entry removal on the
// entry existing: of a racing Release and reconcile, exactly one succeeds.
//
// A slot is returned as an increment ("SET tokens = tokens + :c",
// conditioned on the balance staying within capacity), not as an absolute
// balance conditioned on the version: releases of one bucket commute
// instead of racing each other, and an increment written by another SDK in
// between is never erased. Only a restore that would exceed capacity (the
// capacity guard) writes the capped balance, conditioned on the version and
// the balance read.
//
// dims lists all the lease's dimensions. For a dimension whose item is gone
// (DynamoDB's TTL process or the SDKs' reconciler deleted it) while its
// bucket still lists the lease in holders, the transaction restores the
// cost kept in the holder entry and removes the entry, conditioned on the
// entry existing and on the lease item being absent (a ConditionCheck): the
// entry is the slot's only record, so whoever removes it restores it, once.
// (Sluice writes its concurrent lease items with cost 0 for the SDKs'
// reconciler, which restores from the item; see leaseItemAttrs.) An entry
// written before the cost was kept in it, on a concurrent bucket, cannot be
// restored and is left.
//
// A lost race reads again after a jittered backoff, until ctx ends.
//
// expiredAt, when not zero, is the reconciler's time: the lease is removed
// only if it is still expired then (each item delete and holder entry
// removal is also conditioned on its expiry), so that a lease extended
// after the reconciler found it expired keeps its slot.
func (s *Store) remove(ctx context.Context, uuid string, dims []string, lis []*leaseItem, expiredAt int64) (removal, error) {
	names := append([]string(nil), dims...)
	for _, li := range lis {
		if !slices.Contains(names, li.dim) {
			names = append(names, li.dim)
		}
	}
	id, _ := store.ParseLeaseID(uuid)
	for n := 0; ; n++ {
		if err := backoff(ctx, n); err != nil {
			return removal{}, err
		}
		rows, err := s.getItems(ctx, names)
		if err != nil {
			return removal{}, err
		}
		t, err := s.removeTx(uuid, names, lis, rows, expiredAt)
		if err != nil {
			return removal{}, err
		}
		if len(lis) == 0 && len(t.items) == 0 {
			// No record and no holder entry left; an index item alone
			// (its items deleted by another SDK) goes too.
			_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(store.LeasePrefix + uuid)}, opts)
			return removal{}, classify("remove lease index", err)
		}
		t.items = append(t.items, s.indexDelete(uuid))
		t.kinds = append(t.kinds, txIndex)
		err = s.transact(ctx, "remove lease", &dynamodb.TransactWriteItemsInput{
			TransactItems: t.items, ClientRequestToken: aws.String(requestToken(id, t.parts...)),
		})
		for _, d := range t.r.live {
			s.forget(d)
		}
		if err == nil {
			t.r.ok, t.r.orphan = true, len(t.r.live) == 0
			return t.r, nil
		}
		if errors.Is(err, store.ErrContention) {
			continue
		}
		if reasons(err) == nil {
			return removal{}, err
		}
		retry := false
		for i, c := range reasons(err) {
			if reasonIs(c, "ConditionalCheckFailed") && i < len(t.kinds) {
				switch t.kinds[i] {
				case txDelete:
					return removal{}, nil // someone else removed it
				case txGone:
					// The lease item exists after all: it is settled
					// through the item (Release, the reconciler's Scan).
					return removal{}, nil
				}
				retry = true
			}
		}
		if !retry {
			return removal{}, classify("remove lease", err)
		}
	}
}

// removeTx builds one attempt of remove from the rows read.
func (s *Store) removeTx(uuid string, names []string, lis []*leaseItem, rows map[string]map[string]types.AttributeValue, expiredAt int64) (*removeTx, error) {
	present := make(map[string]*leaseItem, len(lis))
	t := &removeTx{
		items: make([]types.TransactWriteItem, 0, 2*len(names)),
		kinds: make([]int, 0, 2*len(names)),
		// A fresh nonce per attempt: resending this attempt is idempotent,
		// while a racing remover never shares its token.
		parts: []int64{-1, int64(rand.Uint64() >> 1)},
	}
	for _, li := range lis {
		present[li.dim] = li
		del := &types.Delete{
			TableName: aws.String(s.table), Key: key(li.pk),
			ConditionExpression:      aws.String("attribute_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		}
		if expiredAt != 0 {
			del.ConditionExpression = aws.String("attribute_exists(#pk) AND (#exp <= :now OR (attribute_not_exists(#exp) AND #ttl < :nows))")
			del.ExpressionAttributeNames["#exp"], del.ExpressionAttributeNames["#ttl"] = attrExpiresMs, attrTTL
			del.ExpressionAttributeValues = map[string]types.AttributeValue{":now": numInt(expiredAt), ":nows": numInt(expiredAt / 1000)}
		}
		t.items = append(t.items, types.TransactWriteItem{Delete: del})
		t.kinds = append(t.kinds, txDelete)
	}
	for _, dim := range names {
		row := rows[dim]
		if row == nil {
			continue
		}
		bi, err := decodeBucket(row)
		if err != nil {
			// A row Sluice cannot decode (written by another client with
			// values it refuses; Peek reports it): nothing can be restored
			// into it, as into a missing one. Refusing would leave the
			// lease for every later pass to fail on.
			continue
		}
		li := present[dim]
		h, holds := bi.holders[uuid]
		cost := h.cost
		switch {
		case li != nil:
			if li.hasInc && bi.inc != li.inc {
				continue // a re-created namesake: not this lease's bucket
			}
			if !holds || !h.hasCost {
				cost = li.cost
			}
		case !holds:
			continue // nothing of this lease here
		case bi.b.Type == bucket.Concurrent && !h.hasCost:
			continue // an entry without its cost: left for the lease item
		}
		t.r.live = append(t.r.live, dim)
		if bi.b.Type != bucket.Concurrent && !holds {
			continue
		}
		up, rest := restoreUpdate(bi, uuid, holds, cost)
		if holds && expiredAt != 0 {
			expiredEntry(up, h, expiredAt)
		}
		up.TableName = aws.String(s.table)
		if rest != nil {
			t.r.restored = append(t.r.restored, *rest)
		}
		t.parts = append(t.parts, bi.version)
		t.items = append(t.items, types.TransactWriteItem{Update: up})
		t.kinds = append(t.kinds, txBucket)
		if li == nil {
			t.items = append(t.items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
				TableName: aws.String(s.table), Key: key(store.LeasePrefix + dim + "#" + uuid),
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": attrPK},
			}})
			t.kinds = append(t.kinds, txGone)
		}
	}
	return t, nil
}

// restoreUpdate is the bucket update of a removal on bi: the holder entry
// uuid removed (when holds), and on a concurrent bucket cost returned, as
// an increment when it fits under capacity, else as the capped balance.
func restoreUpdate(bi *bucketItem, uuid string, holds bool, cost int64) (*types.Update, *store.Restored) {
	names := map[string]string{"#ver": attrVersion, "#inc": attrInc}
	vals := map[string]types.AttributeValue{":one": numInt(1)}
	cond := incCond(bi, vals)
	expr := ""
	var rest *store.Restored
	if bi.b.Type == bucket.Concurrent {
		st, capped := bucket.Restore(bi.lim, bi.st, cost*bucket.Milli)
		rest = &store.Restored{Dimension: bi.b.Name, Cost: cost, Capped: capped}
		names["#tok"] = attrTokens
		if capped {
			cond = versionCond(bi, names, vals)
			vals[":t"] = num(formatMilli(st.Tokens))
			expr = "SET #tok = :t"
		} else {
			vals[":c"], vals[":max"] = num(formatMilli(cost*bucket.Milli)), num(formatMilli(bi.lim.Capacity-cost*bucket.Milli))
			cond += " AND #tok <= :max"
			expr = "SET #tok = #tok + :c"
		}
	}
	if holds {
		names["#h"], names["#id"] = attrHolders, uuid
		expr += " REMOVE #h.#id"
		cond += " AND attribute_exists(#h.#id)"
	}
	return &types.Update{
		Key:                       key(bi.b.Name),
		UpdateExpression:          aws.String(expr + " ADD #ver :one"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}, rest
}

// expiredEntry adds to up the condition that the holder entry's expiry
// (up's #h.#id) is at most now.
func expiredEntry(up *types.Update, h holder, now int64) {
	path := "#h.#id"
	if h.hasCost {
		path, up.ExpressionAttributeNames["#e"] = "#h.#id.#e", holderExp
	}
	up.ConditionExpression = aws.String(*up.ConditionExpression + " AND " + path + " <= :now")
	up.ExpressionAttributeValues[":now"] = numInt(now)
}

// incCond conditions a write on bi's incarnation: a re-created bucket of
// the same name is another bucket.
func incCond(bi *bucketItem, vals map[string]types.AttributeValue) string {
	if bi.inc == "" {
		return "attribute_not_exists(#inc)"
	}
	vals[":inc"] = str(bi.inc)
	return "#inc = :inc"
}

// transact sends in. When its outcome is unknown — a 5xx, a timeout or a
// broken connection after the SDK's own retries, not throttling, which is a
// refusal — it sends the same request
// again, with the same ClientRequestToken, after a jittered backoff and
// until ctx ends: DynamoDB applies it at most once and answers the repeat
// of an applied request with success, so the outcome is settled instead of
// being reported as an outage while the table is answering. A
// TransactionConflict is returned as store.ErrContention; other errors are
// returned as they came, for their cancellation reasons.
func (s *Store) transact(ctx context.Context, op string, in *dynamodb.TransactWriteItemsInput) error {
	for n := 0; ; n++ {
		_, err := s.db.TransactWriteItems(ctx, in, opts)
		if err == nil || reasons(err) != nil && !conflict(err) {
			return err
		}
		cerr := classify(op, err)
		if !errors.Is(cerr, store.ErrUnavailable) || throttled(err) || ctx.Err() != nil {
			return cerr // throttling is an answer: the request was refused
		}
		if werr := backoff(ctx, n+1); werr != nil {
			return cerr
		}
	}
}

// throttled reports a request DynamoDB refused for throughput.
func throttled(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) && throttle(ae.ErrorCode()) {
		return true
	}
	for _, r := range reasons(err) {
		if reasonIs(r, "ThrottlingError") || reasonIs(r, "ProvisionedThroughputExceeded") {
			return true
		}
	}
	return false
}

// conflict reports a transaction cancelled by a TransactionConflict only.
func conflict(err error) bool {
	rs := reasons(err)
	found := false
	for _, r := range rs {
		if reasonIs(r, "ConditionalCheckFailed") {
			return false
		}
		found = found || reasonIs(r, "TransactionConflict")
	}
	return found
}
