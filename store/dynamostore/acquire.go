package dynamostore

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// decision is what an acquisition computed from a set of rows.
type decision struct {
	next    [store.MaxItems]bucket.State
	costs   [store.MaxItems]int64
	record  bool // write lease items
	hold    bool // list the lease in the buckets' holders (asked for, or concurrent)
	granted bool
}

// decide runs the bucket math on rows (parallel to req.Items) and fills res.
func decide(bis []*bucketItem, req *store.AcquireRequest, now int64, alwaysRecord bool, res *store.AcquireResult) (*decision, error) {
	d := &decision{hold: req.Record}
	n := len(bis)
	for i, bi := range bis {
		c, err := store.ResolveCost(&bi.b, req.Items[i])
		if err != nil {
			return nil, err
		}
		d.costs[i] = c
		if bi.b.Type == bucket.Concurrent {
			d.hold = true
		}
	}
	d.record = d.hold || alwaysRecord
	if cap(res.Items) >= n {
		res.Items = res.Items[:n]
	} else {
		res.Items = make([]store.ItemResult, n)
	}
	poll := req.Poll
	if poll == 0 {
		poll = store.DefaultPoll
	}
	d.granted = true
	var retry int64
	for i, bi := range bis {
		st, wait, ok := bucket.Take(bi.lim, bi.st, now, d.costs[i]*bucket.Milli)
		d.next[i] = st
		ir := &res.Items[i]
		*ir = store.ItemResult{Dimension: bi.b.Name, Type: bi.b.Type, Cost: d.costs[i], Capacity: bi.b.Capacity}
		if ok {
			ir.Remaining = st.Tokens
			continue
		}
		d.granted = false
		if bi.lim.Type == bucket.Concurrent {
			wait = bucket.ConcurrentRetry(now, bi.earliest(), poll.Milliseconds())
		}
		ir.Remaining = bucket.Available(bi.lim, bi.st, now)
		ir.RetryIn = msDur(wait)
		retry = max(retry, wait)
	}
	res.Granted, res.Recorded = d.granted, false
	res.RetryIn, res.ExpiresAt = 0, time.Time{}
	if !d.granted {
		res.RetryIn = msDur(retry)
		for i, bi := range bis {
			if res.Items[i].RetryIn == 0 {
				res.Items[i].Remaining = bucket.Available(bi.lim, bi.st, now)
			}
		}
	}
	return d, nil
}

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	if err := store.ValidateAcquire(req); err != nil {
		return err
	}
	now, err := store.NowMs(req.Now)
	if err != nil {
		return err
	}
	names := make([]string, len(req.Items))
	for i, it := range req.Items {
		names[i] = it.Dimension
	}
	if s.seeds {
		return s.acquireSeeds(ctx, req, now, names, res)
	}
	return s.acquireFast(ctx, req, now, names, res)
}

// acquireSeeds is seed 000's algorithm: consistent pre-read, no write on
// denial, then one version-conditioned transaction with the lease records.
func (s *Store) acquireSeeds(ctx context.Context, req *store.AcquireRequest, now int64, names []string, res *store.AcquireResult) error {
	bis, err := s.readBuckets(ctx, names)
	if err != nil {
		return err
	}
	d, err := decide(bis, req, now, true, res)
	if err != nil || !d.granted {
		return err
	}
	in := s.acquireTx(bis, d, req, now, false)
	_, err = s.db.TransactWriteItems(ctx, in)
	if err != nil {
		rs := reasons(err)
		for i, r := range rs {
			if i < len(bis) && reasonIs(r, "ConditionalCheckFailed") {
				return store.ErrContention
			}
			if i >= len(bis) && reasonIs(r, "ConditionalCheckFailed") {
				return &bucket.FieldError{Field: "lease_id", Value: req.ID.String(), Reason: "is already in use"}
			}
		}
		return classify("acquire", err)
	}
	s.granted(bis, d, req, now, res, false)
	return nil
}

// acquireFast writes against remembered rows and decides again from the
// rows a lost condition returns.
func (s *Store) acquireFast(ctx context.Context, req *store.AcquireRequest, now int64, names []string, res *store.AcquireResult) error {
	n := len(names)
	bis := make([]*bucketItem, n)
	fresh := make([]bool, n)
	var missing []string
	for i, name := range names {
		if bis[i] = s.cached(name); bis[i] == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		if err := s.refresh(ctx, names, bis, fresh, false); err != nil {
			return err
		}
	}
	for attempt := 0; attempt < s.attempts; attempt++ {
		d, err := decide(bis, req, now, false, res)
		if err != nil {
			return err
		}
		if !d.granted {
			if allTrue(fresh) {
				return nil
			}
			// A remembered row may be stale: a release or refund could have
			// added tokens. Deny only on what the table says now.
			if err := s.refresh(ctx, names, bis, fresh, true); err != nil {
				return err
			}
			if d, err = decide(bis, req, now, false, res); err != nil || !d.granted {
				return err
			}
		}
		ok, err := s.writeFast(ctx, bis, fresh, d, req, now)
		if err != nil {
			return err
		}
		if ok {
			s.granted(bis, d, req, now, res, true)
			return nil
		}
	}
	return store.ErrContention
}

func allTrue(b []bool) bool {
	for _, x := range b {
		if !x {
			return false
		}
	}
	return true
}

// refresh reads rows consistently: those missing from bis, or all when all
// is set, marking them fresh.
func (s *Store) refresh(ctx context.Context, names []string, bis []*bucketItem, fresh []bool, all bool) error {
	var want []string
	for i, name := range names {
		if all || bis[i] == nil {
			want = append(want, name)
		}
	}
	got, err := s.readBuckets(ctx, want)
	if err != nil {
		return err
	}
	j := 0
	for i := range names {
		if all || bis[i] == nil {
			bis[i], fresh[i] = got[j], true
			s.remember(got[j])
			j++
		}
	}
	return nil
}

// writeFast performs one conditional write. It returns false, having
// replaced the stale rows in bis with the ones DynamoDB returned, when a
// condition failed.
func (s *Store) writeFast(ctx context.Context, bis []*bucketItem, fresh []bool, d *decision, req *store.AcquireRequest, now int64) (bool, error) {
	tok := s.token(bis, req)
	if len(bis) == 1 && !d.record {
		up := s.bucketUpdate(bis[0], d.next[0], tok, nil)
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: up.TableName, Key: up.Key, UpdateExpression: up.UpdateExpression,
			ConditionExpression: up.ConditionExpression, ExpressionAttributeNames: up.ExpressionAttributeNames,
			ExpressionAttributeValues:           up.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if ccf.Item == nil {
				s.forget(bis[0].b.Name)
				return false, &store.ConfigurationError{Dimension: bis[0].b.Name}
			}
			bi, derr := decodeBucket(ccf.Item)
			if derr != nil {
				return false, derr
			}
			if bi.lastOp == tok && bi.version == bis[0].version+1 {
				// An SDK retry of a write that had already been applied.
				return true, nil
			}
			bis[0], fresh[0] = bi, true
			s.remember(bi)
			return false, nil
		}
		return err == nil, classify("acquire", err)
	}
	in := s.acquireTx(bis, d, req, now, true)
	_, err := s.db.TransactWriteItems(ctx, in)
	if err == nil {
		return true, nil
	}
	rs := reasons(err)
	lost := false
	for i, r := range rs {
		if !reasonIs(r, "ConditionalCheckFailed") {
			continue
		}
		if i >= len(bis) {
			return false, &bucket.FieldError{Field: "lease_id", Value: req.ID.String(), Reason: "is already in use"}
		}
		if r.Item == nil {
			s.forget(bis[i].b.Name)
			return false, &store.ConfigurationError{Dimension: bis[i].b.Name}
		}
		bi, derr := decodeBucket(r.Item)
		if derr != nil {
			return false, derr
		}
		bis[i], fresh[i] = bi, true
		s.remember(bi)
		lost = true
	}
	if lost {
		return false, nil
	}
	return false, classify("acquire", err)
}

// token identifies one write attempt: the store instance (tokens are
// account-wide, and lease ids may repeat across tables), the lease id, the
// decision time and the versions it expects.
func (s *Store) token(bis []*bucketItem, req *store.AcquireRequest) string {
	parts := make([]int64, len(bis)+2)
	parts[0], parts[1] = s.nonce, req.Now.UnixMilli()
	for i, bi := range bis {
		parts[i+2] = bi.version
	}
	return requestToken(req.ID, parts...)
}

// acquireTx builds the transaction of a grant: each bucket conditioned on
// its version, plus one lease item per dimension when recording.
func (s *Store) acquireTx(bis []*bucketItem, d *decision, req *store.AcquireRequest, now int64, allOld bool) *dynamodb.TransactWriteItemsInput {
	tok := s.token(bis, req)
	uuid := req.ID.String()
	expires := now + req.TTL.Milliseconds()
	items := make([]types.TransactWriteItem, 0, 2*len(bis))
	for i, bi := range bis {
		var holder map[string]int64
		if d.hold {
			holder = map[string]int64{uuid: expires}
		}
		up := s.bucketUpdate(bi, d.next[i], tok, holder)
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
				attrLeaseCost: numInt(d.costs[i]),
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
			items = append(items, types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(s.table), Item: item,
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": attrPK},
			}})
		}
	}
	return &dynamodb.TransactWriteItemsInput{TransactItems: items, ClientRequestToken: aws.String(tok)}
}

// bucketUpdate writes state st to bi's row, conditioned on bi's version and
// incarnation, recording tok and adding holders.
func (s *Store) bucketUpdate(bi *bucketItem, st bucket.State, tok string, holders map[string]int64) *types.Update {
	names := map[string]string{"#tok": attrTokens, "#last": attrLast, "#op": attrLastOp, "#ver": attrVersion, "#inc": attrInc}
	vals := map[string]types.AttributeValue{
		":t": num(formatMilli(st.Tokens)), ":l": num(formatSeconds(st.Last)),
		":op": str(tok), ":one": numInt(1), ":v": numInt(bi.version),
	}
	set := "SET #tok = :t, #last = :l, #op = :op"
	if len(holders) > 0 {
		names["#h"] = attrHolders
		if bi.hasMap {
			i := 0
			for id, e := range holders {
				k, v := "#h"+itoa(i), ":h"+itoa(i)
				names[k], vals[v] = id, numInt(e)
				set += ", #h." + k + " = " + v
				i++
			}
		} else {
			m := maps.Clone(holders)
			hm := map[string]types.AttributeValue{}
			for id, e := range m {
				hm[id] = numInt(e)
			}
			vals[":hm"] = &types.AttributeValueMemberM{Value: hm}
			set += ", #h = :hm"
		}
	}
	return &types.Update{
		TableName: aws.String(s.table), Key: key(bi.b.Name),
		UpdateExpression:          aws.String(set + " ADD #ver :one"),
		ConditionExpression:       aws.String(versionCond(bi, vals)),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}
}

// versionCond is the optimistic-locking condition on bi's row: same
// version, same incarnation (a re-created bucket restarts its version).
func versionCond(bi *bucketItem, vals map[string]types.AttributeValue) string {
	c := "#ver = :v"
	if bi.version == 0 {
		c = "(#ver = :v OR attribute_not_exists(#ver))"
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

// granted fills res after a successful write and updates the caches.
func (s *Store) granted(bis []*bucketItem, d *decision, req *store.AcquireRequest, now int64, res *store.AcquireResult, cache bool) {
	expires := now + req.TTL.Milliseconds()
	res.ExpiresAt = time.UnixMilli(expires)
	res.Recorded = d.record
	uuid := req.ID.String()
	for i, bi := range bis {
		if !cache {
			continue
		}
		nb := *bi
		nb.st, nb.version, nb.lastOp = d.next[i], bi.version+1, s.token(bis, req)
		if d.hold {
			nb.holders = maps.Clone(bi.holders)
			if nb.holders == nil {
				nb.holders = map[string]int64{}
			}
			nb.holders[uuid], nb.hasMap = expires, true
		}
		s.remember(&nb)
	}
	if d.record {
		s.rememberLease(req.ID, append([]string(nil), namesOf(bis)...))
	}
}

func namesOf(bis []*bucketItem) []string {
	out := make([]string, len(bis))
	for i, bi := range bis {
		out[i] = bi.b.Name
	}
	return out
}
