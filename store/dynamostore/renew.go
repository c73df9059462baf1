package dynamostore

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
)

// Renewals in place.
//
// A waiter renews its ticket at every poll. Written like every other
// change of the row, conditioned on its version and bumping it, each
// renewal would fail the conditional writes of everyone else that read
// the row before it: with a few waiters polling a hot row, many grants
// and renewals lose and decide again. Yet a renewal of a live ticket, at
// its place and cost, changes no decision that saw the ticket live: it
// stays live, at the same place, holding the same cost. Only a decision
// that found a ticket dead could be changed by it. So a denial that only
// renews its caller's live ticket on one row, with nothing else to write
// there, sets the ticket's expiry conditioned on the ticket being as read
// and still live, leaves the version alone and counts the renewal in the
// row's renewals attribute; and every write whose decision found a ticket
// of another dead is conditioned on that count as read
// (queueEdit.renewedCond), so that it decides again if one was renewed in
// between. A renewal that finds its ticket changed or dead is written the
// usual way; one that finds the balance grown since the row was read (a
// release freed a slot) makes the caller decide again, as a lost write of
// the denial would.

// canRenewInPlace reports whether q, a denial's edit of bi at now that
// writes state st, only renews id's live ticket at its place and cost.
func canRenewInPlace(bi *bucketItem, q *queueEdit, st bucket.State, id string, now int64) bool {
	if q == nil || q.put != id || len(q.remove) > 0 || q.dead || st != bi.st {
		return false
	}
	old, ok := bi.waiters[id]
	return ok && old.Expires > now && old.At == q.ticket.At && old.Cost == q.ticket.Cost
}

// renewInPlace writes q's renewal of its ticket on bi (see
// canRenewInPlace) without bumping the version. It returns false when the
// ticket was no longer as read and live at now: the caller writes the
// denial the usual way. Written, it reports whether the row's balance
// had grown since bi was read. The row as written is remembered.
func (s *Store) renewInPlace(ctx context.Context, bi *bucketItem, q *queueEdit, now int64) (ok, changed bool, err error) {
	names := map[string]string{"#w": attrWaiters, "#id": q.put, "#a": ticketAt, "#e": ticketExp, "#c": ticketCst, "#rn": attrRenewals, "#inc": attrInc}
	vals := map[string]types.AttributeValue{
		":a": numInt(q.ticket.At), ":e": numInt(q.ticket.Expires), ":c": numInt(q.ticket.Cost), ":now": numInt(now), ":one": numInt(1),
	}
	cond := incCond(bi, vals) + " AND #w.#id.#a = :a AND #w.#id.#c = :c AND #w.#id.#e > :now"
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(bi.b.Name),
		UpdateExpression:          aws.String("SET #w.#id.#e = :e ADD #rn :one"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
		ReturnValues:              types.ReturnValueAllNew,
	}, opts)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, false, nil
	}
	if err != nil {
		return false, false, classify("renew", err)
	}
	nb, err := decodeBucket(out.Attributes)
	if err != nil {
		s.forget(bi.b.Name)
		return true, true, nil
	}
	s.remember(nb)
	return true, nb.st.Tokens > bi.st.Tokens, nil
}
