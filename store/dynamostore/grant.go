package dynamostore

import (
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// token identifies one write attempt: the store instance (tokens are
// account-wide, and lease ids may repeat across tables), the lease id, the
// decision time and the versions it expects.
//
// The request's dimensions, costs, TTL and Record flag and the buckets'
// incarnations are part of it too:
// two different acquisitions with one lease id (a reuse, answered by
// replay) must not share a token, or DynamoDB would refuse the second with
// IdempotentParameterMismatch instead of evaluating its conditions.
func (s *Store) token(bis []*bucketItem, req *store.AcquireRequest, valid int64) string {
	h := fnv.New64a()
	for i, it := range req.Items {
		h.Write([]byte(it.Dimension + "\x00" + strconv.FormatInt(it.Cost, 10) + "\x00" + bis[i].inc + "\x00"))
	}
	rec := int64(0)
	if req.Record {
		rec = 1
	}
	parts := make([]int64, len(bis)+5, len(bis)+7)
	parts[0], parts[1], parts[2] = s.nonce, req.Now.UnixMilli(), int64(h.Sum64()>>1)
	parts[3], parts[4] = req.TTL.Milliseconds(), rec
	for i, bi := range bis {
		parts[i+5] = bi.version
	}
	if valid != 0 {
		// A reservation: never the token of an acquisition.
		parts = append(parts, -4, valid)
	}
	return requestToken(req.ID, parts...)
}

// expiry returns the expiry of the lease d grants: TTL from the decision
// time, or from a reservation's valid instant.
func (d *decision) expiry(req *store.AcquireRequest, now int64) int64 {
	return max(now, d.valid) + req.TTL.Milliseconds()
}

// acquireTx builds the transaction of a grant: each bucket conditioned on
// its version, plus one lease item per dimension when recording.
func (s *Store) acquireTx(bis []*bucketItem, d *decision, req *store.AcquireRequest, now int64, allOld bool) *dynamodb.TransactWriteItemsInput {
	tok := s.token(bis, req, d.valid)
	uuid := req.ID.String()
	expires := d.expiry(req, now)
	items := make([]types.TransactWriteItem, 0, 2*len(bis))
	for i, bi := range bis {
		id := ""
		if d.hold {
			id = uuid
		}
		up := s.rowUpdate(bi, d.next[i], tok, id, newHolder(bi, expires, d.costs[i]), d.queue[i], "")
		if allOld {
			up.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		}
		items = append(items, types.TransactWriteItem{Update: up})
	}
	if d.record {
		dims := make([]types.AttributeValue, len(bis))
		for i, bi := range bis {
			dims[i] = str(bi.b.Name)
		}
		for i, bi := range bis {
			item := map[string]types.AttributeValue{
				attrPK:        str(leasePK(bi.b.Name, req.ID)),
				attrDimension: str(bi.b.Name),
				attrLeaseCost: numInt(leaseItemCost(bi, d.costs[i])),
				attrCreated:   num(formatSeconds(now)),
				attrTTL:       numInt((expires + 999) / 1000),
				attrCaller:    str(req.Caller),
				attrLeaseID:   str(uuid),
				attrDims:      &types.AttributeValueMemberL{Value: dims},
				attrExpiresMs: numInt(expires),
				attrCreatedMs: numInt(now),
				attrType:      str(bi.b.Type.String()),
			}
			if bi.inc != "" {
				item[attrInc] = str(bi.inc)
			}
			if bi.b.Type == bucket.Concurrent {
				item[attrSlotCost] = numInt(d.costs[i])
			}
			if d.valid != 0 {
				item[attrValidMs] = numInt(d.valid)
			}
			items = append(items, types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(s.table), Item: item,
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": attrPK},
			}})
		}
	}
	if d.record {
		items = append(items, s.indexPut(req.ID, namesOf(bis), expires))
	} else if !s.unchecked {
		items = append(items, s.indexAbsent(req.ID))
	}
	return &dynamodb.TransactWriteItemsInput{TransactItems: items, ClientRequestToken: aws.String(tok)}
}

// leaseItemCost is the cost attribute of a lease item on bi. On a
// concurrent bucket it is 0, and the cost is kept in slot_cost and in the
// bucket's holder entry: the SDKs' reconciler restores an expired lease's
// cost attribute to its bucket and deletes the item, but leaves the holder
// entry, from which Sluice restores the slot (see remove) — with the real
// cost in the item, the slot would come back twice. The SDKs' reconciler
// still deletes such an item, restoring nothing.
func leaseItemCost(bi *bucketItem, cost int64) int64 {
	if bi.b.Type == bucket.Concurrent {
		return 0
	}
	return cost
}

// newHolder is the holders entry of a lease granted on bi: on a concurrent
// bucket it keeps the cost, so that the slot can be restored after
// DynamoDB's TTL process has deleted the lease item.
func newHolder(bi *bucketItem, expires, cost int64) holder {
	return holder{exp: expires, cost: cost, hasCost: bi.b.Type == bucket.Concurrent}
}

// bucketUpdate writes state st to bi's row, conditioned on bi's version and
// incarnation, recording tok and, when id is not empty, adding the holders
// entry id → h, conditioned on id not being listed already (a lease id
// reused while the bucket still lists it would otherwise overwrite the
// entry, and its slot would never come back).
func (s *Store) bucketUpdate(bi *bucketItem, st bucket.State, tok string, id string, h holder) *types.Update {
	return s.rowUpdate(bi, st, tok, id, h, nil, "")
}

// rowUpdate is bucketUpdate that also applies q to the row's waiter queue
// and, when drop is not empty, removes drop's holders entry.
func (s *Store) rowUpdate(bi *bucketItem, st bucket.State, tok string, id string, h holder, q *queueEdit, drop string) *types.Update {
	names := map[string]string{"#tok": attrTokens, "#last": attrLast, "#op": attrLastOp, "#ver": attrVersion, "#inc": attrInc}
	vals := map[string]types.AttributeValue{
		":t": num(formatMilli(st.Tokens)), ":l": num(formatSeconds(st.Last)),
		":op": str(tok), ":one": numInt(1), ":v": numInt(bi.version),
	}
	set := []string{"#tok = :t", "#last = :l", "#op = :op"}
	var rem []string
	set, rem = optUpdate(attrUntil, "cu", bi.st.Until, st.Until, names, vals, set, rem)
	set, rem = optUpdate(attrReserved, "ru", bi.st.Reserved, st.Reserved, names, vals, set, rem)
	set, rem = optUpdate(attrCharged, "ch", bi.st.Charged, st.Charged, names, vals, set, rem)
	set, rem = q.clauses(bi, names, vals, set, rem)
	if drop != "" {
		names["#h"], names["#hd"] = attrHolders, drop
		rem = append(rem, "#h.#hd")
	}
	cond := versionCond(bi, names, vals) + q.renewedCond(bi, names, vals)
	if id != "" {
		names["#h"] = attrHolders
		if bi.hasMap {
			names["#hid"], vals[":h"] = id, h.value()
			set = append(set, "#h.#hid = :h")
			cond += " AND attribute_not_exists(#h.#hid) AND size(#h) < :maxh"
			vals[":maxh"] = numInt(int64(s.maxLeases))
		} else {
			vals[":hm"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{id: h.value()}}
			set = append(set, "#h = :hm")
		}
	}
	return &types.Update{
		TableName: aws.String(s.table), Key: key(bi.b.Name),
		UpdateExpression:          aws.String(updateExpr(set, rem)),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}
}

// updateExpr joins SET and REMOVE clauses into an update expression that
// also bumps the version.
func updateExpr(set, rem []string) string {
	e := ""
	if len(set) > 0 {
		e = "SET " + strings.Join(set, ", ") + " "
	}
	if len(rem) > 0 {
		e += "REMOVE " + strings.Join(rem, ", ") + " "
	}
	return e + "ADD #ver :one"
}

// optUpdate adds the clauses that move an optional numeric attribute of a
// row (cooldown_until_ms, reserved_until_ms) from old (as read; the write
// is conditioned on the version read) to next: a SET, or a REMOVE when it
// becomes 0 (a row without the attribute reads as 0). Nothing when it does
// not change, so that a row that never had one never gets the attribute.
// p names its placeholders.
func optUpdate(attr, p string, old, next int64, names map[string]string, vals map[string]types.AttributeValue, set, rem []string) ([]string, []string) {
	switch {
	case next == old:
		return set, rem
	case next == 0:
		names["#"+p] = attr
		return set, append(rem, "#"+p)
	}
	names["#"+p], vals[":"+p] = attr, numInt(next)
	return append(set, "#"+p+" = :"+p), rem
}

// versionCond is the optimistic-locking condition on bi's row: same
// version, same incarnation (a re-created bucket restarts its version) and
// same tokens, compared with the value exactly as read. The Python and TypeScript SDKs
// return a concurrent slot with "SET tokens = tokens + :cost", which leaves
// the version alone: conditioning on the version only, a write of an
// absolute balance computed from an earlier read would erase that
// increment.
func versionCond(bi *bucketItem, names map[string]string, vals map[string]types.AttributeValue) string {
	names["#ver"], names["#inc"], names["#tok"] = attrVersion, attrInc, attrTokens
	vals[":v"], vals[":rt"] = numInt(bi.version), num(bi.rawTok)
	c := "#ver = :v AND #tok = :rt"
	if bi.version == 0 {
		c = "(#ver = :v OR attribute_not_exists(#ver)) AND #tok = :rt"
	}
	if bi.inc == "" {
		return c + " AND attribute_not_exists(#inc)"
	}
	vals[":inc"] = str(bi.inc)
	return c + " AND #inc = :inc"
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
