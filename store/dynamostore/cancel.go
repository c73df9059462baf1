package dynamostore

import (
	"context"
	"errors"
	"math/rand/v2"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Cancel implements store.Queuer. A recorded reservation is cancelled in
// one transaction: its lease items and index item deleted (each item
// conditioned on existing, so that of two racing cancellations, or a
// cancellation and a release, one wins), and on each of its buckets
// bucket.Unreserve applied and its holders entry removed, conditioned on
// the version read. One without a record is bucket.Unreserve on the rows
// the caller names, conditioned on their versions: one UpdateItem against
// the remembered row for a single dimension, else a read and a
// transaction. A lost race reads again.
func (s *Store) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.CancelResult{}, err
	}
	now := req.Now.UnixMilli()
	if !req.Recorded {
		return s.cancelUnrecorded(ctx, req, now)
	}
	dims, err := s.findDims(ctx, req.ID)
	if err != nil || dims == nil {
		return store.CancelResult{}, err
	}
	defer s.forgetLease(req.ID)
	uuid := req.ID.String()
	pks := make([]string, 0, 2*len(dims)+1)
	for _, d := range dims {
		pks = append(pks, leasePK(d, req.ID))
	}
	pks = append(append(pks, dims...), indexPK(req.ID))
	for n := 0; n < maxAdminAttempts; n++ {
		if err := backoff(ctx, n); err != nil {
			return store.CancelResult{}, err
		}
		items, err := s.snapshot(ctx, pks)
		if err != nil {
			return store.CancelResult{}, err
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
			return store.CancelResult{}, nil // cancelled or released already
		}
		if lis[0].valid == 0 {
			return store.CancelResult{}, store.NotReservation(req.ID)
		}
		out, tx, rows, err := s.cancelTx(uuid, now, lis, items)
		if err != nil {
			return store.CancelResult{}, err
		}
		tx = append(tx, s.indexDelete(uuid))
		parts := []int64{-6, s.nonce, int64(rand.Uint64() >> 1)}
		err = s.transact(ctx, "cancel", &dynamodb.TransactWriteItemsInput{TransactItems: tx, ClientRequestToken: aws.String(requestToken(req.ID, parts...))})
		for _, d := range rows {
			s.forget(d)
		}
		if err == nil {
			return out, nil
		}
		if !anyCCF(err) && !errors.Is(err, store.ErrContention) {
			return store.CancelResult{}, classify("cancel", err)
		}
	}
	return store.CancelResult{}, store.ErrContention
}

// cancelTx builds the transaction that cancels the recorded reservation
// whose items are lis, on the rows read with them, and what it returns.
func (s *Store) cancelTx(uuid string, now int64, lis []*leaseItem, items map[string]map[string]types.AttributeValue) (store.CancelResult, []types.TransactWriteItem, []string, error) {
	out := store.CancelResult{Cancelled: true}
	tx := make([]types.TransactWriteItem, 0, 2*len(lis)+1)
	var rows []string
	tok := opToken("cancel")
	for _, li := range lis {
		tx = append(tx, types.TransactWriteItem{Delete: &types.Delete{
			TableName: aws.String(s.table), Key: key(li.pk),
			ConditionExpression:      aws.String("attribute_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		}})
		row := items[li.dim]
		if row == nil {
			continue // deleted: nothing to give back
		}
		bi, err := decodeBucket(row)
		if err != nil {
			return out, nil, nil, err
		}
		if li.hasInc && bi.inc != li.inc {
			continue // a re-created namesake: not this reservation's bucket
		}
		st, back := bi.st, int64(0)
		if bi.b.Type != bucket.Concurrent {
			al := bi.st
			at, _ := bucket.Align(bi.lim, al, now, s.skew)
			st, back = bucket.Unreserve(bi.lim, al, at, li.cost*bucket.Milli, li.valid)
		}
		_, holds := bi.holders[uuid]
		if st == bi.st && !holds {
			continue
		}
		drop := ""
		if holds {
			drop = uuid
		}
		tx = append(tx, types.TransactWriteItem{Update: s.rowUpdate(bi, st, tok, "", holder{}, nil, drop)})
		rows = append(rows, bi.b.Name)
		if back > 0 {
			out.Returned = append(out.Returned, store.Returned{Dimension: li.dim, Amount: back})
		}
	}
	return out, tx, rows, nil
}

// errSkip tells cancelUnrecorded that a dimension has nothing to give
// back (a concurrent bucket).
var errSkip = errors.New("dynamostore: skip")

// cancelUnrecorded gives back a reservation without a record, which the
// caller describes.
func (s *Store) cancelUnrecorded(ctx context.Context, req store.CancelRequest, now int64) (store.CancelResult, error) {
	valid := req.ValidAt.UnixMilli()
	out := store.CancelResult{Cancelled: now < valid}
	if len(req.Items) == 1 {
		it := req.Items[0]
		var back int64
		skip := func(b *store.Bucket) error {
			if b.Type == bucket.Concurrent {
				return errSkip
			}
			return nil
		}
		err := s.rewrite(ctx, now, it.Dimension, "cancel", skip, func(bi *bucketItem, al bucket.State, at int64) bucket.State {
			var st bucket.State
			st, back = bucket.Unreserve(bi.lim, al, at, it.Cost*bucket.Milli, valid)
			return st
		})
		var ce *store.ConfigurationError
		switch {
		case errors.Is(err, errSkip) || errors.As(err, &ce):
			return out, nil
		case err != nil:
			return store.CancelResult{}, err
		}
		if back > 0 {
			out.Returned = []store.Returned{{Dimension: it.Dimension, Amount: back}}
		}
		return out, nil
	}
	names := make([]string, len(req.Items))
	for i, it := range req.Items {
		names[i] = it.Dimension
	}
	defer func() {
		for _, d := range names {
			s.forget(d)
		}
	}()
	for n := 0; n < maxAdminAttempts; n++ {
		if err := backoff(ctx, n); err != nil {
			return store.CancelResult{}, err
		}
		rows, err := s.snapshot(ctx, names)
		if err != nil {
			return store.CancelResult{}, err
		}
		out.Returned = nil
		tok := opToken("cancel")
		var tx []types.TransactWriteItem
		for _, it := range req.Items {
			if rows[it.Dimension] == nil {
				continue
			}
			bi, err := decodeBucket(rows[it.Dimension])
			if err != nil {
				return store.CancelResult{}, err
			}
			if bi.b.Type == bucket.Concurrent {
				continue
			}
			al := bi.st
			at, _ := bucket.Align(bi.lim, al, now, s.skew)
			st, back := bucket.Unreserve(bi.lim, al, at, it.Cost*bucket.Milli, valid)
			if st != bi.st {
				tx = append(tx, types.TransactWriteItem{Update: s.bucketUpdate(bi, st, tok, "", holder{})})
			}
			if back > 0 {
				out.Returned = append(out.Returned, store.Returned{Dimension: it.Dimension, Amount: back})
			}
		}
		if len(tx) == 0 {
			return out, nil
		}
		parts := []int64{-7, s.nonce, int64(rand.Uint64() >> 1)}
		err = s.transact(ctx, "cancel", &dynamodb.TransactWriteItemsInput{TransactItems: tx, ClientRequestToken: aws.String(requestToken(req.ID, parts...))})
		if err == nil {
			return out, nil
		}
		if !anyCCF(err) && !errors.Is(err, store.ErrContention) {
			return store.CancelResult{}, classify("cancel", err)
		}
	}
	return store.CancelResult{}, store.ErrContention
}

// Dequeue implements store.Queuer: one consistent read of the named rows,
// then one write of those whose queue changes (the lease's ticket removed
// and the dead tickets purged, as the memory store does): an UpdateItem
// for one row, a transaction for several, each conditioned on the version
// read and bumping it, so that an acquisition decided with the ticket
// ahead of it decides again. Missing rows, time-based rows and rows
// without a ticket to remove are not written; a lost race reads again.
func (s *Store) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	now := req.Now.UnixMilli()
	defer func() {
		for _, d := range req.Dimensions {
			s.forget(d)
		}
	}()
	for n := 0; n < maxAdminAttempts; n++ {
		if err := backoff(ctx, n); err != nil {
			return err
		}
		rows, err := s.snapshot(ctx, req.Dimensions)
		if err != nil {
			return err
		}
		tok := opToken("dequeue")
		var bis []*bucketItem
		var ups []*types.Update
		for _, d := range req.Dimensions {
			if rows[d] == nil {
				continue
			}
			bi, err := decodeBucket(rows[d])
			if err != nil {
				return err
			}
			if bi.b.Type != bucket.Concurrent {
				continue
			}
			q := &queueEdit{}
			if _, ok := bi.waiters[req.ID.String()]; ok {
				q.remove = append(q.remove, req.ID.String())
			}
			q.purge(bi, now, "")
			if q.empty() {
				continue
			}
			bis = append(bis, bi)
			ups = append(ups, s.rowUpdate(bi, bi.st, tok, "", holder{}, q, ""))
		}
		switch len(ups) {
		case 0:
			return nil
		case 1:
			ok, _, err := s.writeUpdate(ctx, bis[0], ups[0], tok, "dequeue")
			if err != nil || ok {
				return err
			}
			continue
		}
		tx := make([]types.TransactWriteItem, len(ups))
		for i, up := range ups {
			tx[i] = types.TransactWriteItem{Update: up}
		}
		parts := []int64{-8, s.nonce, int64(rand.Uint64() >> 1)}
		err = s.transact(ctx, "dequeue", &dynamodb.TransactWriteItemsInput{TransactItems: tx, ClientRequestToken: aws.String(requestToken(req.ID, parts...))})
		if err == nil {
			return nil
		}
		if !anyCCF(err) && !errors.Is(err, store.ErrContention) {
			return classify("dequeue", err)
		}
	}
	return store.ErrContention
}
