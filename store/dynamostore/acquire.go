package dynamostore

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/store"
)

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	now := req.Now.UnixMilli()
	names := make([]string, len(req.Items))
	for i, it := range req.Items {
		names[i] = it.Dimension
	}
	if s.readFirst {
		return s.acquireReadThenTransact(ctx, req, now, names, res)
	}
	return s.acquireFast(ctx, req, now, names, res)
}

// acquireReadThenTransact is the original algorithm: read, then transact: consistent pre-read, no write on
// denial, then one version-conditioned transaction with the lease records.
func (s *Store) acquireReadThenTransact(ctx context.Context, req *store.AcquireRequest, now int64, names []string, res *store.AcquireResult) error {
	// One read fetches the rows and the lease id's index item, if any.
	items, err := s.snapshot(ctx, append(names[:len(names):len(names)], indexPK(req.ID)))
	if err != nil {
		return err
	}
	bis, err := decodeRows(items, names)
	if err != nil {
		return err
	}
	d, err := decide(bis, req, now, s.skew, true, res)
	if err != nil {
		return err
	}
	if items[indexPK(req.ID)] != nil {
		if err := s.replay(ctx, req, d.costs[:len(bis)], now, res); err != errRetry {
			return err
		}
		return store.ErrContention
	}
	if !d.granted {
		again, err := s.deny(ctx, req, bis, d, now, res, false)
		if again {
			return store.ErrContention
		}
		return err
	}
	if err := s.full(bis, d); err != nil {
		return err
	}
	in := s.acquireTx(bis, d, req, now, true)
	_, err = s.db.TransactWriteItems(ctx, in, opts)
	if err != nil {
		rs := reasons(err)
		if inUse(rs, bis, d, req.ID) {
			if err := s.replay(ctx, req, d.costs[:len(bis)], now, res); err != errRetry {
				return err
			}
			return store.ErrContention
		}
		for _, r := range rs {
			if reasonIs(r, "ConditionalCheckFailed") {
				return store.ErrContention
			}
		}
		return classify("acquire", err)
	}
	s.granted(bis, d, req, now, res, false)
	return nil
}

// fastRows is what acquireFast knows: the rows (remembered or read), which
// of them were read by this call, and whether the lease id's index item
// was read with them.
type fastRows struct {
	names    []string
	bis      []*bucketItem
	fresh    []bool
	id       store.LeaseID
	known    bool // the index item was read
	recorded bool // and exists
}

// acquireFast writes against remembered rows and decides again from the
// rows a lost condition returns.
func (s *Store) acquireFast(ctx context.Context, req *store.AcquireRequest, now int64, names []string, res *store.AcquireResult) error {
	f := &fastRows{names: names, bis: make([]*bucketItem, len(names)), fresh: make([]bool, len(names)), id: req.ID}
	missing := false
	for i, name := range names {
		if f.bis[i] = s.cached(name); f.bis[i] == nil {
			missing = true
		}
	}
	if missing {
		if err := s.refresh(ctx, f, false); err != nil {
			return err
		}
	}
	for attempt := 0; attempt < s.attempts; attempt++ {
		d, err := decide(f.bis, req, now, s.skew, false, res)
		if err != nil {
			return err
		}
		if !d.granted && !allTrue(f.fresh) {
			// A remembered row may be stale: a release or refund could have
			// added tokens. Deny only on what the table says now.
			if err := s.refresh(ctx, f, true); err != nil {
				return err
			}
			if d, err = decide(f.bis, req, now, s.skew, false, res); err != nil {
				return err
			}
		}
		if !d.granted {
			check := (d.record || !s.unchecked) && !(f.known && !f.recorded)
			again, err := s.deny(ctx, req, f.bis, d, now, res, check)
			if err != nil || !again {
				return err
			}
			if err := s.refresh(ctx, f, true); err != nil {
				return err
			}
			continue
		}
		if err := s.full(f.bis, d); err != nil {
			if allTrue(f.fresh) {
				return err
			}
			if err := s.refresh(ctx, f, true); err != nil {
				return err
			}
			continue
		}
		ok, err := s.writeFast(ctx, f.bis, f.fresh, d, req, now, res)
		if err == errRetry {
			continue
		}
		if err == errReplayed {
			return nil
		}
		if err != nil {
			return err
		}
		if ok {
			s.granted(f.bis, d, req, now, res, true)
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

// refresh reads rows consistently — those missing from f, or all when all
// is set — marking them fresh, and with them the lease id's index item.
func (s *Store) refresh(ctx context.Context, f *fastRows, all bool) error {
	var want []string
	for i, name := range f.names {
		if all || f.bis[i] == nil {
			want = append(want, name)
		}
	}
	keys := want
	if !s.unchecked {
		keys = append(want[:len(want):len(want)], indexPK(f.id))
	}
	items, err := s.snapshot(ctx, keys)
	if err != nil {
		return err
	}
	got, err := decodeRows(items, want)
	if err != nil {
		return err
	}
	if !s.unchecked {
		f.known, f.recorded = true, items[indexPK(f.id)] != nil
	}
	j := 0
	for i := range f.names {
		if all || f.bis[i] == nil {
			f.bis[i], f.fresh[i] = got[j], true
			s.remember(got[j])
			j++
		}
	}
	return nil
}

// writeFast performs one conditional write. It returns false, having
// replaced the stale rows in bis with the ones DynamoDB returned, when a
// condition failed.
func (s *Store) writeFast(ctx context.Context, bis []*bucketItem, fresh []bool, d *decision, req *store.AcquireRequest, now int64, res *store.AcquireResult) (bool, error) {
	tok := s.token(bis, req)
	if len(bis) == 1 && !d.record && s.unchecked {
		up := s.bucketUpdate(bis[0], d.next[0], tok, "", holder{})
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: up.TableName, Key: up.Key, UpdateExpression: up.UpdateExpression,
			ConditionExpression: up.ConditionExpression, ExpressionAttributeNames: up.ExpressionAttributeNames,
			ExpressionAttributeValues:           up.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}, opts)
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
	_, err := s.db.TransactWriteItems(ctx, in, opts)
	if err == nil {
		return true, nil
	}
	rs := reasons(err)
	if inUse(rs, bis, d, req.ID) {
		if err := s.replay(ctx, req, d.costs[:len(bis)], now, res); err != nil {
			return false, err
		}
		return false, errReplayed
	}
	lost := false
	for i, r := range rs {
		if !reasonIs(r, "ConditionalCheckFailed") {
			continue
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
		nb.rawTok = formatMilli(d.next[i].Tokens)
		if d.hold {
			nb.holders = maps.Clone(bi.holders)
			if nb.holders == nil {
				nb.holders = map[string]holder{}
			}
			nb.holders[uuid], nb.hasMap = newHolder(bi, expires, d.costs[i]), true
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

// errReplayed tells acquireFast that replay answered the request.
var errReplayed = errors.New("dynamostore: replayed")

// inUse reports whether a cancelled acquisition failed because its lease id
// is in use: its index or lease item exists, or a bucket lists it.
func inUse(rs []types.CancellationReason, bis []*bucketItem, d *decision, id store.LeaseID) bool {
	for i, r := range rs {
		if reasonIs(r, "ConditionalCheckFailed") && (i >= len(bis) || d.hold && holds(r.Item, id)) {
			return true
		}
	}
	return false
}

// deny settles a denial: a request that asks for a record whose id already
// has one is answered by replay; otherwise the rows whose clock was more
// than the maximum skew ahead are written rebased (bucket.Align), the
// denial's only write. again reports a lost race: the caller reads again
// and decides again.
//
// check asks deny to look for the lease id's record first (false when the
// caller already knows there is none).
func (s *Store) deny(ctx context.Context, req *store.AcquireRequest, bis []*bucketItem, d *decision, now int64, res *store.AcquireResult, check bool) (again bool, err error) {
	if check {
		ok, err := s.recorded(ctx, req.ID)
		if err != nil {
			return false, err
		}
		if ok {
			err := s.replay(ctx, req, d.costs[:len(bis)], now, res)
			return err == errRetry, err
		}
	}
	for i, bi := range bis {
		if !d.rebased[i] {
			continue
		}
		ok, err := s.writeState(ctx, bi, d.aligned[i], "rebase")
		if err != nil || !ok {
			return err == nil, err
		}
	}
	return false, nil
}

// holds reports whether a bucket row returned by a failed condition lists
// lease id among its holders.
func holds(row map[string]types.AttributeValue, id store.LeaseID) bool {
	m, ok := row[attrHolders].(*types.AttributeValueMemberM)
	if !ok {
		return false
	}
	_, ok = m.Value[id.String()]
	return ok
}
