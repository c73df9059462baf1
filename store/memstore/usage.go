package memstore

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/ontopix/sluice/store"
)

// usage is the memory store's usage history: per dimension and period,
// the rows by identity. Expired rows are never listed, and a put drops
// the expired rows of its dimension at most once a minute.
type usage struct {
	mu     sync.Mutex
	series map[usageSeries]*usageRows
}

type usageSeries struct {
	dimension string
	period    time.Duration
}

type usageRows struct {
	rows  map[usageID]usageVal
	swept time.Time // when the expired rows were last dropped
}

type usageID struct {
	start          int64 // Unix ms
	caller, writer string
}

type usageVal struct {
	counters map[string]int64 // a private copy
	updated  int64            // Unix ms; 0 when the row had none
	expires  int64            // Unix ms
}

// PutUsage implements store.Usager. Each row replaces the row of its
// identity unless that row was Updated later; a row already past its
// retention (by time.Now) is not kept.
func (s *Store) PutUsage(ctx context.Context, rows []store.UsageRow, retention store.UsageRetention) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := store.ValidateUsage(rows, retention); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	now := time.Now()
	nowMs := now.UnixMilli()
	u := &s.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.series == nil {
		u.series = map[usageSeries]*usageRows{}
	}
	for _, r := range rows {
		k := usageSeries{r.Dimension, r.Period}
		rs := u.series[k]
		if rs == nil {
			rs = &usageRows{rows: map[usageID]usageVal{}, swept: now}
			u.series[k] = rs
		}
		exp := r.Expires(retention).UnixMilli()
		id := usageID{r.Start.UnixMilli(), r.Caller, r.Writer}
		if exp <= nowMs {
			continue // past its retention: neither stored nor listed
		}
		upd := r.Updated.UnixMilli()
		if old, ok := rs.rows[id]; ok && old.updated > upd {
			continue // a late put: the row holds a later one's totals
		}
		rs.rows[id] = usageVal{counters: maps.Clone(r.Counters), expires: exp, updated: upd}
	}
	for k, rs := range u.series {
		if k.dimension != rows[0].Dimension || now.Sub(rs.swept) < time.Minute {
			continue
		}
		rs.swept = now
		maps.DeleteFunc(rs.rows, func(_ usageID, v usageVal) bool { return v.expires <= nowMs })
	}
	return nil
}

// ListUsage implements store.Usager.
func (s *Store) ListUsage(ctx context.Context, q store.UsageQuery) ([]store.UsageRow, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := store.ValidateUsageQuery(q); err != nil {
		return nil, err
	}
	nowMs := time.Now().UnixMilli()
	u := &s.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	rs := u.series[usageSeries{q.Dimension, q.Period}]
	if rs == nil {
		return nil, nil
	}
	var out []store.UsageRow
	for id, v := range rs.rows {
		start := time.UnixMilli(id.start).UTC()
		if v.expires <= nowMs || !store.UsageInRange(q, start) {
			continue
		}
		r := store.UsageRow{Dimension: q.Dimension, Caller: id.caller, Period: q.Period, Start: start,
			Writer: id.writer, Counters: maps.Clone(v.counters)}
		if v.updated != 0 {
			r.Updated = time.UnixMilli(v.updated).UTC()
		}
		out = append(out, r)
	}
	return out, nil
}
