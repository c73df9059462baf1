package memstore

import (
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// leaseByID returns the lease record with id, or nil.
func (s *Store) leaseByID(id store.LeaseID) *lease {
	sh := s.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.m[id]
}

// replay answers an acquisition whose id already has record l: the grant
// it was when the request is the same (a retry), else ErrLeaseInUse. It
// changes nothing. The caller holds the locks of es, the request's buckets
// in request order, and costs are the request's resolved costs.
func (s *Store) replay(req *store.AcquireRequest, res *store.AcquireResult, l *lease, es []*entry, costs []int64, now int64) error {
	items := make([]store.Item, len(es))
	for i, e := range es {
		items[i] = store.Item{Dimension: e.b.Name, Cost: costs[i]}
	}
	sh := s.shard(req.ID)
	sh.mu.Lock()
	same := store.SameItems(l.items, items)
	sh.mu.Unlock()
	if !same {
		return store.LeaseInUse(req.ID)
	}
	res.Granted, res.Recorded, res.RetryIn, res.Ahead = true, true, 0, 0
	res.ExpiresAt = time.UnixMilli(l.expires.Load())
	for i, e := range es {
		st := e.st
		at, _ := bucket.Align(e.lim, st, now, skewMs)
		res.Items[i] = store.ItemResult{Dimension: e.b.Name, Type: e.b.Type, Cost: costs[i], Capacity: e.b.Capacity,
			Remaining: bucket.Available(e.lim, st, at)}
	}
	return nil
}
