package dynamostore

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// reconcileFilter selects, in one Scan, the two things Reconcile works on:
//
//   - lease items expired at :now (ms), or, for items the Python and TypeScript SDKs
//     wrote, whose ttl (seconds) is below :nows (the SDKs' reconciler);
//   - bucket rows whose holders map is not empty, among which those listing
//     an expired lease whose item DynamoDB's TTL process has deleted.
//
// A Scan is billed on the items it reads, not on those the filter keeps, so
// the second half costs no read capacity beyond the first.
const reconcileFilter = "(begins_with(#pk, :p) AND (#exp <= :now OR (attribute_not_exists(#exp) AND #ttl < :nows)))" +
	" OR (NOT begins_with(#pk, :p) AND size(#h) > :zero)"

// allExpired reports whether every lease item in lis has expired at now.
func allExpired(lis []*leaseItem, now int64) bool {
	for _, li := range lis {
		if li.expires > now {
			return false
		}
	}
	return true
}

// Reconcile implements store.Store in two phases over one paginated,
// consistent Scan (reconcileFilter), at most req.Limit leases per call in
// all:
//
//  1. expired lease items, grouped into leases; each lease is removed as by
//     Release (see remove), including the holder entries of dimensions
//     whose item is already gone;
//  2. expired holder entries of leases the Scan found no item for: their
//     items are gone (DynamoDB's TTL process deletes expired items on its
//     own schedule), so the holder entry is the slot's only record. Each
//     such lease is restored from its entries' costs and the entries
//     removed, in one transaction conditioned on every bucket's version,
//     on the entries existing and on the lease items being absent: a
//     racing Release or reconciler restores it, or this one does, once.
//     Phase 2 runs only after a complete Scan (a candidate's item may lie
//     beyond where a Scan stopped) and within what phase 1 left of the
//     limit. Entries on requests/tokens buckets are removed the same way,
//     restoring nothing; entries without a cost on concurrent buckets
//     (written before the cost was kept) cannot be restored and are left.
//
// Counting is per lease in both phases, as in the memory store.
func (s *Store) Reconcile(ctx context.Context, req store.ReconcileRequest) (store.ReconcileResult, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return store.ReconcileResult{}, err
	}
	now := req.Now.UnixMilli()
	limit := req.Limit
	var res store.ReconcileResult
	var found []*leaseItem              // phase 1: one item of each expired lease
	var orphaned []string               // phase 2 candidates, in Scan order
	holderDims := map[string][]string{} // phase 2: lease → dimensions listing it
	overflow := false                   // more phase 2 candidates than limit
	seen := map[string]bool{}
	err = s.scan(ctx, reconcileFilter, map[string]string{"#exp": attrExpiresMs, "#ttl": attrTTL, "#h": attrHolders},
		map[string]types.AttributeValue{":now": numInt(now), ":nows": numInt(now / 1000), ":zero": numInt(0)},
		func(item map[string]types.AttributeValue) (bool, error) {
			li, ok := decodeLease(item)
			if !ok {
				li, ok = decodeIndex(item)
			}
			if ok {
				if seen[li.uuid] {
					return true, nil
				}
				if len(found) == limit {
					res.More = true
					return false, nil
				}
				seen[li.uuid] = true
				found = append(found, li)
				return true, nil
			}
			bi, err := decodeBucket(item)
			if err != nil {
				return true, nil // not a row Sluice can restore into; Peek reports it
			}
			for uuid, h := range bi.holders {
				if h.exp > now || seen[uuid] || bi.b.Type == bucket.Concurrent && !h.hasCost {
					continue
				}
				if _, listed := holderDims[uuid]; !listed {
					if len(orphaned) == limit {
						overflow = true
						continue
					}
					orphaned = append(orphaned, uuid)
				}
				holderDims[uuid] = append(holderDims[uuid], bi.b.Name)
			}
			return true, nil
		})
	if err != nil {
		return res, err
	}
	if res.More {
		// The Scan stopped early: a candidate's item may lie beyond
		// where it stopped. Phase 2 waits for a complete Scan.
		orphaned = nil
	}
	dims := map[string]bool{}
	count := func(r removal) {
		res.Restored++
		if r.orphan {
			res.Orphans++
			return
		}
		for _, d := range r.live {
			dims[d] = true
		}
		// Reclaimed and AlreadyCapped count leases, not items.
		if len(r.restored) > 0 {
			res.Reclaimed++
		}
		for _, x := range r.restored {
			if x.Capped {
				res.AlreadyCapped++
				break
			}
		}
	}
	for _, li := range found {
		lis := []*leaseItem{li}
		if len(li.dims) > 1 || li.index {
			if lis, err = s.loadLease(ctx, li.uuid, li.dims); err != nil {
				return res, err
			}
		}
		if !allExpired(lis, now) {
			continue // extended since the index was read
		}
		r, err := s.remove(ctx, li.uuid, li.dims, lis, now)
		if err != nil {
			return res, err
		}
		if !r.ok {
			continue // released or reconciled concurrently
		}
		if id, err := store.ParseLeaseID(li.uuid); err == nil {
			s.forgetLease(id)
		}
		count(r)
	}
	budget := limit - len(found)
	for _, uuid := range orphaned {
		if seen[uuid] {
			continue // its item turned up later in the Scan: settled above
		}
		if budget == 0 {
			res.More = true
			break
		}
		budget--
		r, err := s.remove(ctx, uuid, holderDims[uuid], nil, now)
		if err != nil {
			return res, err
		}
		if !r.ok {
			continue // released or reconciled concurrently, or its item exists
		}
		if id, err := store.ParseLeaseID(uuid); err == nil {
			s.forgetLease(id)
		}
		count(r)
	}
	if overflow {
		res.More = true
	}
	for d := range dims {
		res.Dimensions = append(res.Dimensions, d)
	}
	slices.Sort(res.Dimensions)
	return res, nil
}
