package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Penalize implements store.Store.
func (s *Store) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Penalty{}, err
	}
	defer done(cancel)
	now := s.now(req.Now)
	v, err := s.runW(ctx, "penalize", penalizeScript, []string{s.dim(req.Dimension).bucket}, now, req.FactorMilli, s.skewMs)
	if err != nil {
		return store.Penalty{}, err
	}
	r := reply{v: v}
	switch r.int() {
	case -1:
		return store.Penalty{}, &store.ConfigurationError{Dimension: req.Dimension}
	case -2:
		return store.Penalty{}, (&store.Bucket{Name: req.Dimension, Config: bucket.Config{Type: bucket.Concurrent}}).CheckPenalizable()
	}
	res := store.Penalty{Before: r.int(), After: r.int()}
	return res, r.err
}

// readState reads the 10 values peek.lua and list.lua return per bucket
// after its name or found flag.
func readState(r *reply, name string, now int64) store.BucketState {
	t, capm, amtm, per, k, d := r.int(), r.int(), r.int(), r.int(), r.int(), r.int()
	bs := store.BucketState{
		Bucket: store.Bucket{Name: name, Config: bucket.Config{
			Type: bucket.LimitType(t), Capacity: capm / bucket.Milli, RefillAmount: amtm / bucket.Milli,
			RefillPeriod: time.Duration(per) * time.Millisecond, CostPerCall: k, MaxDebt: d,
		}},
		Tokens: r.int(), LastRefill: r.int(), ActiveLeases: int(r.int()), Now: time.UnixMilli(now),
	}
	if x := r.int(); x != 0 {
		bs.NextExpiry = time.UnixMilli(x)
	}
	return bs
}

// Peek implements store.Store: one script call per Cluster slot (one in
// all on a standalone server).
func (s *Store) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done(cancel)
	ms, dimensions := s.now(req.Now), req.Dimensions
	out := make([]store.BucketState, len(dimensions))
	found := make([]bool, len(dimensions))
	groups := map[uint16][]int{}
	var order []uint16
	for i, d := range dimensions {
		g := uint16(0)
		if s.slotCheck {
			g = s.dim(d).slot
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range order {
		idx := groups[g]
		keys := make([]string, 0, 2*len(idx))
		for _, i := range idx {
			k := s.dim(dimensions[i])
			keys = append(keys, k.bucket, k.index)
		}
		v, err := s.run(ctx, "peek", peekScript, keys, ms, s.skewMs)
		if err != nil {
			return nil, err
		}
		r := reply{v: v}
		at := r.int()
		for _, i := range idx {
			found[i] = r.int() == 1
			out[i] = readState(&r, dimensions[i], at)
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	for i, d := range dimensions {
		if !found[i] {
			return nil, &store.ConfigurationError{Dimension: d}
		}
	}
	return out, nil
}

// PutBucket implements store.Store. It registers the vendor first (a
// separate command: the registry lives in its own slot), then writes the
// bucket in one script.
func (s *Store) PutBucket(ctx context.Context, req store.PutBucketRequest) error {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done(cancel)
	ms, b := s.now(req.Now), req.Bucket
	k := s.dim(b.Name)
	if s.pruned() == "" { // else the put script registers the vendor
		if err := s.register(ctx, k.vendor); err != nil {
			return fail("put bucket", err)
		}
	}
	l := b.Config.Limits()
	rs := 0
	if req.Reset {
		rs = 1
	}
	v, err := s.runW(ctx, "put bucket", putScript, []string{k.bucket, s.bucketSet(k.vendor)}, ms, b.Name,
		int64(l.Type), l.Capacity, l.Amount, l.Period, l.Floor, b.CostPerCall, b.MaxDebt, rs, s.skewMs,
		s.pruned(), k.vendor)
	if err != nil {
		return err
	}
	r := reply{v: v}
	if r.int() == -1 {
		old := store.Bucket{Name: b.Name, Config: bucket.Config{Type: bucket.LimitType(r.int())}}
		if err := store.CheckTypeChange(old, b); err != nil {
			return err
		}
		return fmt.Errorf("redisstore: put bucket: the script refused a change from %s to %s", old.Type, b.Type)
	}
	return r.err
}

// pruned returns the registry key when the scripts keep the registry
// themselves (a standalone server with one tag per vendor: every key is
// reachable from one script, so a vendor without buckets or leases is
// dropped atomically), else "".
func (s *Store) pruned() string {
	if s.ids == "" {
		return ""
	}
	return s.registry()
}

// register adds a vendor to the registry (acknowledged by replicas with
// WithReplicaAck).
func (s *Store) register(ctx context.Context, vendor string) error {
	if s.ackReplicas > 0 {
		return s.acked(ctx, s.registry(), redis.NewIntCmd(ctx, "sadd", s.registry(), vendor))
	}
	return bounded(ctx, s.honours, func() error { return s.rdb.SAdd(ctx, s.registry(), vendor).Err() })
}

// DeleteBucket implements store.Store.
func (s *Store) DeleteBucket(ctx context.Context, req store.DeleteBucketRequest) error {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done(cancel)
	name := req.Name
	k := s.dim(name)
	cmd, err := s.write(ctx, "delete bucket", deleteScript, []string{k.bucket, k.index, s.bucketSet(k.vendor)},
		name, s.pruned(), k.vendor, s.leaseIndex(k.vendor))
	if err != nil {
		return err
	}
	n, err := cmd.Int64()
	if err != nil {
		return fail("delete bucket", err)
	}
	if n == 0 {
		return &store.ConfigurationError{Dimension: name}
	}
	return nil
}

// ListBuckets implements store.Store: one script call per vendor.
func (s *Store) ListBuckets(ctx context.Context, req store.ListBucketsRequest) ([]store.BucketState, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done(cancel)
	ms := s.now(req.Now)
	vs, err := s.vendors(ctx)
	if err != nil {
		return nil, fail("list buckets", err)
	}
	out := []store.BucketState{}
	for _, v := range vs {
		res, err := s.run(ctx, "list buckets", listScript, []string{s.bucketSet(v)}, s.keyspace, ms, s.skewMs)
		if err != nil {
			return nil, err
		}
		r := reply{v: res}
		at := r.int()
		for r.more() && r.err == nil {
			name := r.str()
			out = append(out, readState(&r, name, at))
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	return out, nil
}

// leasePage bounds the index entries one leases script call reads.
const leasePage = 500

// Leases implements store.Store: vendor by vendor, each vendor's index in
// script calls that read at most leasePage entries (so a listing of many
// records never blocks the server for long), until the vendor has given
// q.Limit matching records or none are left; then sorted by expiry.
func (s *Store) Leases(ctx context.Context, q store.LeaseQuery) ([]store.LeaseRecord, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done(cancel)
	ms := s.now(q.Now)
	vs, err := s.vendors(ctx)
	if err != nil {
		return nil, fail("leases", err)
	}
	var out []store.LeaseRecord
	for _, v := range vs {
		if out, err = s.vendorLeases(ctx, v, q, ms, out); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b store.LeaseRecord) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID.String(), b.ID.String())
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// vendorLeases appends to out the records of one vendor that q selects, in
// pages, at most q.Limit of them when it is positive.
func (s *Store) vendorLeases(ctx context.Context, vendor string, q store.LeaseQuery, now int64, out []store.LeaseRecord) ([]store.LeaseRecord, error) {
	expired := 0
	if q.ExpiredOnly {
		expired = 1
	}
	page := s.leasePage
	if page <= 0 {
		page = leasePage
	}
	var cursor, cursorID string
	var skip int64
	for found := 0; ; {
		want := page
		if q.Limit > 0 {
			want = min(want, q.Limit-found)
		}
		res, err := s.run(ctx, "leases", leasesScript, []string{s.leaseIndex(vendor)},
			s.prefix, now, expired, q.Dimension, want, page, cursor, cursorID, skip)
		if err != nil {
			return nil, err
		}
		r := reply{v: res}
		r.int()
		more := r.int() == 1
		cursor, cursorID, skip = r.str(), r.str(), r.int()
		for r.more() && r.err == nil {
			l, err := readLease(&r)
			if err != nil {
				return nil, err
			}
			out = append(out, l)
			found++
		}
		if r.err != nil {
			return nil, r.err
		}
		if !more || (q.Limit > 0 && found >= q.Limit) {
			return out, nil
		}
	}
}

// readLease reads one lease of the leases script's reply.
func readLease(r *reply) (store.LeaseRecord, error) {
	id, err := store.ParseLeaseID(r.str())
	if err != nil {
		return store.LeaseRecord{}, err
	}
	l := store.LeaseRecord{ID: id, Caller: r.str(), CreatedAt: time.UnixMilli(r.int()), ExpiresAt: time.UnixMilli(r.int())}
	l.Items = make([]store.Item, r.int())
	for i := range l.Items {
		l.Items[i] = store.Item{Dimension: r.str(), Cost: r.int()}
	}
	return l, nil
}

// reconcileChunk bounds the leases one reconcile script call processes.
const reconcileChunk = 500

// Reconcile implements store.Store: vendor by vendor, each vendor's expired
// records in script calls of at most reconcileChunk, never more than
// req.Limit records in all.
func (s *Store) Reconcile(ctx context.Context, req store.ReconcileRequest) (store.ReconcileResult, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.ReconcileResult{}, err
	}
	defer done(cancel)
	now := s.now(req.Now)
	limit := req.Limit
	vs, err := s.vendors(ctx)
	if err != nil {
		return store.ReconcileResult{}, fail("reconcile", err)
	}
	var res store.ReconcileResult
vendors:
	for _, vendor := range vs {
		for {
			left := limit - res.Restored
			if left <= 0 {
				res.More = true // there may be more; the next batch will tell
				break vendors
			}
			// One script call handles at most reconcileChunk leases, so a
			// large Limit never blocks the server for long.
			n := min(left, reconcileChunk)
			v, err := s.runW(ctx, "reconcile", reconcileScript, []string{s.leaseIndex(vendor)}, s.keyspace, now, n)
			if err != nil {
				return res, err
			}
			r := reply{v: v}
			more := r.int() == 1
			done := int(r.int())
			res.Restored += done
			res.Reclaimed += int(r.int())
			res.AlreadyCapped += int(r.int())
			res.Orphans += int(r.int())
			for r.more() && r.err == nil {
				res.Dimensions = append(res.Dimensions, r.str())
			}
			if r.err != nil {
				return res, r.err
			}
			if !more {
				break // this vendor is done
			}
			if done == 0 {
				res.More = true
				break vendors
			}
		}
	}
	slices.Sort(res.Dimensions)
	res.Dimensions = slices.Compact(res.Dimensions)
	return res, nil
}
