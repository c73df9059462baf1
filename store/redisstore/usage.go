package redisstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/store"
)

// Usage history (store.Usager).
//
// The rows of one dimension and period live in one hash per bucket of
// time: an hour of minute rows, or a day of hour rows, e.g.
// prefix{vendor}:um:1767225600000#rpm. A field is one row, its Start in
// Unix ms, the caller's length and the caller and the writer
// ("1767225660000:5:alicewriter-uuid", unambiguous whatever the caller
// holds); its value the row's counters, Updated and expiry as JSON. The
// sorted set prefix{vendor}:uim#rpm (uih for hour rows) indexes the
// buckets that exist, scored by their start, so that a read finds them
// with one ZRANGE, whatever the range asked, and then reads them all with
// one pipeline of HGETALLs: a day of minute rows is two round trips (one
// ZRANGE, 25 HGETALLs pipelined), not one per row.
//
// Every key of a dimension carries the dimension's hash tag, so they
// share a Cluster slot and one script can write them all atomically, and
// the pipelined reads go to one node.
//
// A put is one script (usage_put.lua) that HSETs every row, which replaces
// its value whole, so that go-redis's resend of the script, or a caller's
// retry, leaves what one put left (HINCRBY would count twice); a row whose
// stored value was updated later than the put's is left alone, so that a
// late put never rolls it back. Each hash
// expires (PEXPIREAT) at the end of its bucket plus the retention of its
// period, pushed later by later puts and never earlier; the index expires
// with its newest bucket, and a put drops from it the buckets past the
// put's retention. Reads leave out rows past their own expiry, which a
// bucket's hash may keep until its newest row expires.

//go:embed lua/usage_put.lua
var usagePutLua string

var usagePutScript = redis.NewScript(usagePutLua)

var _ store.Usager = (*Store)(nil)

// usageBucket is the span of time one hash holds for rows of period p.
func usageBucket(p time.Duration) time.Duration {
	if p == time.Hour {
		return 24 * time.Hour
	}
	return time.Hour
}

// usageKeys returns the index key and the prefix of the bucket keys of a
// dimension's rows of period p; a bucket's key is its prefix, its start
// in Unix ms and the dimension's rest.
func (s *Store) usageKeys(dim string, p time.Duration) (index, bucket, rest string) {
	v, rest := s.splitDim(dim)
	tag := s.vendorTag(v)
	c := "m"
	if p == time.Hour {
		c = "h"
	}
	return tag + ":ui" + c + rest, tag + ":u" + c + ":", rest
}

// usageValue is a row's value in its bucket hash.
type usageValue struct {
	Counters map[string]int64 `json:"c,omitempty"`
	Updated  int64            `json:"u,omitempty"` // Unix ms; 0 for none
	Expires  int64            `json:"x"`           // Unix ms
}

// usageField returns a row's field in its bucket hash.
func usageField(start int64, caller, writer string) string {
	return strconv.FormatInt(start, 10) + ":" + strconv.Itoa(len(caller)) + ":" + caller + writer
}

// parseUsageField splits a field written by usageField.
func parseUsageField(f string) (start int64, caller, writer string, err error) {
	a, rest, ok := strings.Cut(f, ":")
	b, rest2, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return 0, "", "", fmt.Errorf("malformed usage field %q", f)
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	n, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || n < 0 || n > len(rest2) {
		return 0, "", "", fmt.Errorf("malformed usage field %q", f)
	}
	return start, rest2[:n], rest2[n:], nil
}

// PutUsage implements store.Usager in one script call (see usage_put.lua).
// Rows already past their retention (by this process's clock) are
// skipped.
func (s *Store) PutUsage(ctx context.Context, rows []store.UsageRow, retention store.UsageRetention) error {
	if err := store.ValidateUsage(rows, retention); err != nil {
		return err
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done(cancel)
	now := time.Now()
	for _, p := range []time.Duration{time.Minute, time.Hour} {
		if err := s.putUsage(ctx, rows, p, retention, now); err != nil {
			return err
		}
	}
	return nil
}

// putUsage writes the rows of period p.
func (s *Store) putUsage(ctx context.Context, rows []store.UsageRow, p time.Duration, retention store.UsageRetention, now time.Time) error {
	type bucket struct {
		start  int64
		fields []any
	}
	var buckets []*bucket
	byStart := map[int64]*bucket{}
	span := usageBucket(p)
	for _, r := range rows {
		if r.Period != p || !r.Expires(retention).After(now) {
			continue
		}
		bs := r.Start.Truncate(span).UnixMilli()
		b := byStart[bs]
		if b == nil {
			b = &bucket{start: bs}
			byStart[bs] = b
			buckets = append(buckets, b)
		}
		v := usageValue{Counters: r.Counters, Updated: r.Updated.UnixMilli(), Expires: r.Expires(retention).UnixMilli()}
		js, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("redisstore: put usage: %w", err)
		}
		b.fields = append(b.fields, usageField(r.Start.UnixMilli(), r.Caller, r.Writer), v.Updated, string(js))
	}
	if len(buckets) == 0 {
		return nil
	}
	ret := retention.For(p)
	index, prefix, rest := s.usageKeys(rows[0].Dimension, p)
	keys := make([]string, 0, 1+len(buckets))
	keys = append(keys, index)
	args := []any{now.UnixMilli(), now.Add(-ret - span).UnixMilli()}
	for _, b := range buckets {
		keys = append(keys, prefix+strconv.FormatInt(b.start, 10)+rest)
		exp := time.UnixMilli(b.start).Add(span + ret).UnixMilli()
		args = append(args, b.start, exp, len(b.fields)/3)
		args = append(args, b.fields...)
	}
	_, err := s.write(ctx, "put usage", usagePutScript, keys, args...)
	return err
}

// ListUsage implements store.Usager: one ZRANGE on the index, then one
// pipeline of HGETALLs on the buckets it names.
func (s *Store) ListUsage(ctx context.Context, q store.UsageQuery) ([]store.UsageRow, error) {
	if err := store.ValidateUsageQuery(q); err != nil {
		return nil, err
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done(cancel)
	if !q.From.Before(q.To) {
		return nil, nil
	}
	span := usageBucket(q.Period)
	index, prefix, rest := s.usageKeys(q.Dimension, q.Period)
	var starts []string
	err = bounded(ctx, s.honours, func() (err error) {
		starts, err = s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: index, ByScore: true,
			Start: strconv.FormatInt(q.From.Truncate(span).UnixMilli(), 10),
			Stop:  "(" + strconv.FormatInt(q.To.UnixMilli(), 10)}).Result()
		return err
	})
	if err != nil {
		return nil, fail("list usage", err)
	}
	if len(starts) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(starts))
	err = bounded(ctx, s.honours, func() error {
		_, err := s.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for i, st := range starts {
				cmds[i] = pl.HGetAll(ctx, prefix+st+rest)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fail("list usage", err)
	}
	nowMs := time.Now().UnixMilli()
	var out []store.UsageRow
	for _, c := range cmds {
		for f, js := range c.Val() {
			start, caller, writer, err := parseUsageField(f)
			if err != nil {
				return nil, fmt.Errorf("redisstore: list usage: %w", err)
			}
			st := time.UnixMilli(start).UTC()
			if !store.UsageInRange(q, st) {
				continue
			}
			var v usageValue
			if err := json.Unmarshal([]byte(js), &v); err != nil {
				return nil, fmt.Errorf("redisstore: list usage: row %q: %w", f, err)
			}
			if v.Expires <= nowMs {
				continue
			}
			r := store.UsageRow{Dimension: q.Dimension, Caller: caller, Period: q.Period, Start: st, Writer: writer, Counters: v.Counters}
			if v.Updated != 0 {
				r.Updated = time.UnixMilli(v.Updated).UTC()
			}
			out = append(out, r)
		}
	}
	return out, nil
}
