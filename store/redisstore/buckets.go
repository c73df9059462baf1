package redisstore

import (
	"context"
	"fmt"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

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
	rs, op := 0, ""
	if req.Reset {
		// A reset fills the bucket: sent again after another caller's
		// grant, it would fill it again. Its reply is kept under an op key
		// (op.lua); a reconfiguration run twice changes nothing more.
		rs, op = 1, opKey(k.tag, "put", store.LeaseID{})
	}
	args := []any{ms, b.Name,
		int64(l.Type), l.Capacity, l.Amount, l.Period, l.Floor, b.CostPerCall, b.MaxDebt, rs, s.skewMs,
		s.pruned(), k.vendor}
	args = append(args, putCondition(req)...)
	// The operation's key and window go last (op.lua).
	args = append(args, op, s.opWindowMs)
	v, err := s.runW(ctx, "put bucket", putScript, []string{k.bucket, s.bucketSet(k.vendor)}, args...)
	if err != nil {
		return err
	}
	r := reply{v: v}
	switch r.int() {
	case -2:
		return &store.ConflictError{Dimension: b.Name, Found: r.int() == 1}
	case -1:
		old := store.Bucket{Name: b.Name, Config: bucket.Config{Type: bucket.LimitType(r.int())}}
		if err := store.CheckTypeChange(old, b); err != nil {
			return err
		}
		return fmt.Errorf("redisstore: put bucket: the script refused a change from %s to %s", old.Type, b.Type)
	}
	return r.err
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
	cmd, err := s.write(ctx, "delete bucket", deleteScript, []string{k.bucket, k.index, s.bucketSet(k.vendor), k.queue, k.qexp},
		name, s.pruned(), k.vendor, s.leaseIndex(k.vendor), opKey(k.tag, "delete", store.LeaseID{}), s.opWindowMs)
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

// putCondition returns put.lua's condition arguments for req, always
// seven: none, "a" (create only), or "m" and the configuration to match
// (store.SameConfig: its limits and effective cost per call); the unused
// ones are zero. Then comes the empty flag ("1": a new time-based bucket
// starts at zero).
func putCondition(req store.PutBucketRequest) []any {
	empty := "0"
	if req.Empty {
		empty = "1"
	}
	switch {
	case req.IfAbsent:
		return []any{"a", 0, 0, 0, 0, 0, 0, empty}
	case req.IfMatch != nil:
		m := req.IfMatch
		l := m.Limits()
		return []any{"m", int64(l.Type), l.Capacity, l.Amount, l.Period, l.Floor, m.Cost(), empty}
	}
	return []any{"", 0, 0, 0, 0, 0, 0, empty}
}
