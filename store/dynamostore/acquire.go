package dynamostore

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req *store.AcquireRequest, res *store.AcquireResult) error {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	unlock, err := s.lockRows(ctx, dimsOf(req))
	defer unlock()
	if err != nil {
		return err
	}
	now := req.Now.UnixMilli()
	op := &acquireOp{s: s, req: req, now: now, res: res}
	if s.readFirst {
		return s.readThenTransact(ctx, op, req, now)
	}
	return s.fast(ctx, op, req, now)
}

// grantOp is what differs between an acquisition and a reservation on the
// two paths: the decision, the answer to a reused lease id and the result.
type grantOp interface {
	// decide runs the bucket math on rows parallel to the request's items.
	decide(bis []*bucketItem, alwaysRecord bool) (*decision, error)
	// replay answers a request whose lease id has a record (see replay);
	// it returns errRetry when the record is gone.
	replay(ctx context.Context, d *decision, n int) error
	// granted fills the result after a grant was written, and updates the
	// caches (the rows too when cache is set).
	granted(bis []*bucketItem, d *decision, cache bool)
}

// acquireOp is an acquisition.
type acquireOp struct {
	s   *Store
	req *store.AcquireRequest
	now int64
	res *store.AcquireResult
}

func (o *acquireOp) decide(bis []*bucketItem, always bool) (*decision, error) {
	return decide(bis, o.req, o.now, o.s.skew, always, o.res)
}

func (o *acquireOp) replay(ctx context.Context, d *decision, n int) error {
	_, err := o.s.replay(ctx, o.req, d.costs[:n], o.now, o.res)
	return err
}

func (o *acquireOp) granted(bis []*bucketItem, d *decision, cache bool) {
	o.s.granted(bis, d, o.req, o.now, o.res, cache)
}

// readThenTransact is the original algorithm: read, then transact: consistent pre-read, no write on
// denial (but for a queued acquisition's tickets), then one version-conditioned transaction with the lease
// records.
func (s *Store) readThenTransact(ctx context.Context, op grantOp, req *store.AcquireRequest, now int64) error {
	names := dimsOf(req)
	// One read fetches the rows and the lease id's index item, if any.
	items, err := s.snapshot(ctx, append(names[:len(names):len(names)], indexPK(req.ID)))
	if err != nil {
		return err
	}
	bis, err := decodeRows(items, names)
	if err != nil {
		return err
	}
	d, err := op.decide(bis, true)
	if err != nil {
		return err
	}
	if items[indexPK(req.ID)] != nil {
		if err := op.replay(ctx, d, len(bis)); err != errRetry {
			return err
		}
		return store.ErrContention
	}
	if !d.granted {
		again, err := s.deny(ctx, req, bis, d, now, false, nil)
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
			if err := op.replay(ctx, d, len(bis)); err != errRetry {
				return err
			}
			return store.ErrContention
		}
		for _, r := range rs {
			if reasonIs(r, "ConditionalCheckFailed") {
				return store.ErrContention
			}
		}
		if lerr := s.sizeLimit(err, namesOf(bis), false); lerr != nil {
			return lerr
		}
		return classify("acquire", err)
	}
	op.granted(bis, d, false)
	return nil
}

// fastRows is what the fast path knows: the rows (remembered or read), which
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

// fast writes against remembered rows and decides again from the
// rows a lost condition returns.
func (s *Store) fast(ctx context.Context, op grantOp, req *store.AcquireRequest, now int64) error {
	names := dimsOf(req)
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
		d, err := op.decide(f.bis, false)
		if err != nil {
			return err
		}
		if !d.granted && !allTrue(f.fresh) {
			// A remembered row may be stale: a release or refund could have
			// added tokens. Deny only on what the table says now.
			if err := s.refresh(ctx, f, true); err != nil {
				return err
			}
			if d, err = op.decide(f.bis, false); err != nil {
				return err
			}
		}
		if !d.granted {
			check := (d.record || !s.unchecked) && !(f.known && !f.recorded)
			again, err := s.deny(ctx, req, f.bis, d, now, check, func() error { return op.replay(ctx, d, len(f.bis)) })
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
		ok, err := s.writeFast(ctx, f.bis, f.fresh, d, req, now)
		if err == errInUse {
			if err = op.replay(ctx, d, len(f.bis)); err == nil {
				return nil
			}
		}
		if err == errRetry {
			continue
		}
		if err != nil {
			return err
		}
		if ok {
			op.granted(f.bis, d, true)
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
//
// It returns errInUse when the lease id turned out to have a record: the
// caller answers by replay.
func (s *Store) writeFast(ctx context.Context, bis []*bucketItem, fresh []bool, d *decision, req *store.AcquireRequest, now int64) (bool, error) {
	tok := s.token(bis, req, d.valid)
	if len(bis) == 1 && !d.record && s.unchecked {
		up := s.rowUpdate(bis[0], d.next[0], tok, "", holder{}, d.queue[0], "")
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
		if lerr := s.sizeLimit(err, namesOf(bis[:1]), false); lerr != nil {
			return false, lerr
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
		return false, errInUse
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
	if lerr := s.sizeLimit(err, namesOf(bis), false); lerr != nil {
		return false, lerr
	}
	return false, classify("acquire", err)
}

// granted fills res after a successful write and updates the caches.
func (s *Store) granted(bis []*bucketItem, d *decision, req *store.AcquireRequest, now int64, res *store.AcquireResult, cache bool) {
	res.ExpiresAt = time.UnixMilli(d.expiry(req, now))
	res.Recorded = d.record
	s.cacheGrant(bis, d, req, now, cache)
}

// cacheGrant updates the caches after a grant: the rows as written (when
// cache is set) and the lease's dimensions.
func (s *Store) cacheGrant(bis []*bucketItem, d *decision, req *store.AcquireRequest, now int64, cache bool) {
	expires := d.expiry(req, now)
	uuid := req.ID.String()
	for i, bi := range bis {
		if !cache {
			continue
		}
		nb := *bi
		nb.st, nb.version, nb.lastOp = d.next[i], bi.version+1, s.token(bis, req, d.valid)
		nb.rawTok = formatMilli(d.next[i].Tokens)
		nb.waiters = d.queue[i].apply(bi.waiters)
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

// errInUse tells the caller of writeFast that the lease id has a record:
// the request is answered by replay.
var errInUse = errors.New("dynamostore: lease id in use")

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

// deny settles a denial: a request whose id already has a record is
// answered by replay; otherwise the denial writes what it must (see
// denyWrite). again reports a lost race: the caller reads again and
// decides again.
//
// check asks deny to look for the lease id's record first (false when the
// caller already knows there is none).
func (s *Store) deny(ctx context.Context, req *store.AcquireRequest, bis []*bucketItem, d *decision, now int64, check bool, replay func() error) (again bool, err error) {
	if check {
		ok, err := s.recorded(ctx, req.ID)
		if err != nil {
			return false, err
		}
		if ok {
			err := replay()
			return err == errRetry, err
		}
	}
	return s.denyWrite(ctx, req, bis, d, now)
}

// denyWrite writes a denial's changes in one atomic write (none for a
// caller refused because its clock is too far behind, d.behind): for a
// queued acquisition (req.Queue), the request's tickets on its
// concurrent rows, taken or renewed at one place in line; the dead tickets
// of its concurrent rows are purged either way. Each row is conditioned on its version; again reports a
// lost condition. The rows written are remembered as written.
func (s *Store) denyWrite(ctx context.Context, req *store.AcquireRequest, bis []*bucketItem, d *decision, now int64) (again bool, err error) {
	if d.behind {
		return false, nil
	}
	tok := opToken("deny")
	place := queuePlace(bis, req.ID, now)
	var rows []int
	var qs []*queueEdit
	var ups []*types.Update
	for i, bi := range bis {
		var q *queueEdit
		switch {
		case bi.b.Type != bucket.Concurrent:
		case req.Queue > 0:
			if q, err = ticketEdit(bi, req.ID, d.costs[i], now, place, now+req.Queue.Milliseconds(), s.maxWaiters); err != nil {
				return false, err
			}
		default:
			q = purgeEdit(bi, now)
		}
		if q == nil {
			continue
		}
		rows, qs = append(rows, i), append(qs, q)
		ups = append(ups, s.rowUpdate(bis[i], d.aligned[i], tok, "", holder{}, q, ""))
	}
	if len(ups) == 1 && req.Queue > 0 && canRenewInPlace(bis[rows[0]], qs[0], d.aligned[rows[0]], req.ID.String(), now) {
		ok, changed, err := s.renewInPlace(ctx, bis[rows[0]], qs[0], now)
		if err != nil || ok {
			return changed, err
		}
	}
	switch len(ups) {
	case 0:
		return false, nil
	case 1:
		ok, _, err := s.writeUpdate(ctx, bis[rows[0]], ups[0], tok, "deny")
		if lerr := s.sizeLimit(err, []string{bis[rows[0]].b.Name}, req.Queue > 0); lerr != nil {
			err = lerr
		}
		if err != nil || !ok {
			s.forget(bis[rows[0]].b.Name)
			return err == nil, err
		}
	default:
		tx := make([]types.TransactWriteItem, len(ups))
		parts := []int64{-5, s.nonce, int64(rand.Uint64() >> 1)}
		for k, up := range ups {
			tx[k] = types.TransactWriteItem{Update: up}
		}
		err := s.transact(ctx, "deny", &dynamodb.TransactWriteItemsInput{TransactItems: tx, ClientRequestToken: aws.String(requestToken(req.ID, parts...))})
		if err != nil {
			for _, i := range rows {
				s.forget(bis[i].b.Name)
			}
			if anyCCF(err) {
				return true, nil
			}
			names := make([]string, len(rows))
			for k, i := range rows {
				names[k] = bis[i].b.Name
			}
			if lerr := s.sizeLimit(err, names, req.Queue > 0); lerr != nil {
				return false, lerr
			}
			return false, classify("deny", err)
		}
	}
	for k, i := range rows {
		nb := *bis[i]
		nb.st, nb.version, nb.lastOp, nb.rawTok = d.aligned[i], bis[i].version+1, tok, formatMilli(d.aligned[i].Tokens)
		nb.waiters = qs[k].apply(bis[i].waiters)
		s.remember(&nb)
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
