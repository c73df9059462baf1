package dynamostore

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/ontopix/sluice/store"
)

// leaseItem is one decoded lease item (one dimension of a lease).
type leaseItem struct {
	pk, dim, uuid string
	cost          int64
	created       int64 // ms
	expires       int64 // ms
	valid         int64 // a reservation's valid instant, ms; 0 for an acquisition's lease
	caller        string
	inc           string
	hasInc        bool   // written by Sluice on a bucket with an incarnation
	typ           string // limit_type, when Sluice wrote the item
	dims          []string
	index         bool // an index item (see indexPK), not a lease item
}

// decodeLease reads a lease item written by Sluice or by the Python and TypeScript SDKs
// (which write no lease_id, dims, expires_ms or created_ms: the uuid comes
// from the key and the expiry from ttl).
func decodeLease(item map[string]types.AttributeValue) (*leaseItem, bool) {
	pk, _ := getS(item, attrPK)
	dim, uuid, ok := parseLeasePK(pk)
	if !ok {
		return nil, false
	}
	li := &leaseItem{pk: pk, dim: dim, uuid: uuid}
	if d, ok := getS(item, attrDimension); ok {
		li.dim = d
	}
	if id, ok := getS(item, attrLeaseID); ok {
		li.uuid = id
	}
	if v, ok := getN(item, attrSlotCost); ok {
		li.cost, _ = parseInt(v)
	} else if v, ok := getN(item, attrLeaseCost); ok {
		li.cost, _ = parseInt(v)
	}
	if v, ok := getN(item, attrExpiresMs); ok {
		li.expires, _ = strconv.ParseInt(v, 10, 64)
	} else if v, ok := getN(item, attrTTL); ok {
		li.expires, _ = parseMilliCeil(v)
	}
	if v, ok := getN(item, attrValidMs); ok {
		li.valid, _ = strconv.ParseInt(v, 10, 64)
	}
	if v, ok := getN(item, attrCreatedMs); ok {
		li.created, _ = strconv.ParseInt(v, 10, 64)
	} else if v, ok := getN(item, attrCreated); ok {
		li.created, _ = parseMilli(v)
	}
	li.caller, _ = getS(item, attrCaller)
	li.inc, li.hasInc = getS(item, attrInc)
	li.typ, _ = getS(item, attrType)
	if l, ok := item[attrDims].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			if s, ok := v.(*types.AttributeValueMemberS); ok {
				li.dims = append(li.dims, s.Value)
			}
		}
	}
	if len(li.dims) == 0 {
		li.dims = []string{li.dim}
	}
	return li, true
}

// findDims returns a lease's dimensions: from this process's cache, else
// from its index item (one read), else, for a lease written before index
// items existed, from a consistent Scan for its items.
func (s *Store) findDims(ctx context.Context, id store.LeaseID) ([]string, error) {
	if d := s.leaseDims(id); d != nil {
		return d, nil
	}
	items, err := s.getItems(ctx, []string{indexPK(id)})
	if err != nil {
		return nil, err
	}
	if it := items[indexPK(id)]; it != nil {
		if li, ok := decodeIndex(it); ok {
			return li.dims, nil
		}
	}
	// A lease written before index items existed.
	uuid := id.String()
	var dims []string
	err = s.scan(ctx, "begins_with(#pk, :p) AND #id = :id", map[string]string{"#id": attrLeaseID},
		map[string]types.AttributeValue{":id": str(uuid)}, func(item map[string]types.AttributeValue) (bool, error) {
			if li, ok := decodeLease(item); ok {
				dims = li.dims
				return false, nil
			}
			return true, nil
		})
	return dims, err
}

// loadLease reads a lease's items consistently, in the order of dims;
// dimensions whose item is gone are skipped.
func (s *Store) loadLease(ctx context.Context, uuid string, dims []string) ([]*leaseItem, error) {
	pks := make([]string, len(dims))
	for i, d := range dims {
		pks[i] = store.LeasePrefix + d + "#" + uuid
	}
	items, err := s.getItems(ctx, pks)
	if err != nil {
		return nil, err
	}
	var out []*leaseItem
	for _, pk := range pks {
		if it := items[pk]; it != nil {
			if li, ok := decodeLease(it); ok {
				out = append(out, li)
			}
		}
	}
	return out, nil
}

// Leases implements store.Store with a consistent Scan of the lease items,
// grouped by lease id.
func (s *Store) Leases(ctx context.Context, q store.LeaseQuery) ([]store.LeaseRecord, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	now := q.Now.UnixMilli()
	groups := map[string][]*leaseItem{}
	err = s.scan(ctx, "begins_with(#pk, :p)", nil, nil, func(item map[string]types.AttributeValue) (bool, error) {
		if li, ok := decodeLease(item); ok {
			groups[li.uuid] = append(groups[li.uuid], li)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	var out []store.LeaseRecord
	for uuid, lis := range groups {
		id, err := store.ParseLeaseID(uuid)
		if err != nil {
			continue // not a Sluice lease id; the Python and TypeScript SDKs use other forms
		}
		first := lis[0]
		order := first.dims
		l := store.LeaseRecord{ID: id, Caller: first.caller, CreatedAt: time.UnixMilli(first.created), ExpiresAt: time.UnixMilli(first.expires)}
		if first.valid != 0 {
			l.ValidAt = time.UnixMilli(first.valid)
		}
		has := false
		for _, d := range order {
			for _, li := range lis {
				if li.dim == d {
					l.Items = append(l.Items, store.Item{Dimension: d, Cost: li.cost})
					has = has || d == q.Dimension
				}
			}
		}
		if q.ExpiredOnly && first.expires > now || q.Dimension != "" && !has {
			continue
		}
		out = append(out, l)
	}
	return out, nil
}
