package redisstore

import (
	"context"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
	"github.com/redis/go-redis/v9"
)

// readState reads the 14 values peek.lua and list.lua return per bucket
// after its name or found flag.
func readState(r *reply, name string, now int64) store.BucketState {
	t, capm, amtm, per, k, d := r.int(), r.int(), r.int(), r.int(), r.int(), r.int()
	bs := store.BucketState{
		Bucket: store.Bucket{Name: name, Config: bucket.Config{
			Type: bucket.LimitType(t), Capacity: capm / bucket.Milli, RefillAmount: amtm / bucket.Milli,
			RefillPeriod: time.Duration(per) * time.Millisecond, CostPerCall: k, MaxDebt: d,
		}},
		Tokens: r.int(), LastRefill: r.int(), CooldownUntil: r.int(), ActiveLeases: int(r.int()), Now: time.UnixMilli(now),
	}
	if x := r.int(); x != 0 {
		bs.NextExpiry = time.UnixMilli(x)
	}
	bs.ReservedUntil, bs.Waiters = r.int(), int(r.int())
	bs.Charged = r.int()
	return bs
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

// leasePage bounds the index entries one leases script call reads.
const leasePage = 500

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
	if va := r.int(); va != 0 {
		l.ValidAt = time.UnixMilli(va)
	}
	l.Items = make([]store.Item, r.int())
	for i := range l.Items {
		l.Items[i] = store.Item{Dimension: r.str(), Cost: r.int()}
	}
	return l, nil
}

// reconcileChunk bounds the leases one reconcile script call processes.
const reconcileChunk = 500
