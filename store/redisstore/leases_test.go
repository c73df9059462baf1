package redisstore

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// scriptHook counts script calls and the longest reply.
type scriptHook struct{ calls, longest atomic.Int64 }

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if isScript(cmd) {
			h.calls.Add(1)
			if c, ok := cmd.(*redis.Cmd); ok {
				if v, ok := c.Val().([]any); ok && int64(len(v)) > h.longest.Load() {
					h.longest.Store(int64(len(v)))
				}
			}
		}
		return err
	}
}
func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLeasesPaged lists more lease records than one script call reads
// (pages of 7 index entries here), with ties in expiry, over two vendors:
// every listing is complete and ordered by expiry then id, honours the
// Dimension, ExpiredOnly and Limit filters, and takes at least one script
// call per page.
func TestLeasesPaged(t *testing.T) {
	c := newClient(t)
	s := newStoreOn(t, c)
	ctx := context.Background()
	for _, b := range []store.Bucket{
		{Name: "pa#concurrent", Config: bucket.ConcurrentSlots(1000)},
		{Name: "pa#tpm", Config: bucket.PerPeriod(bucket.Tokens, 100000, time.Minute)},
		{Name: "pb#concurrent", Config: bucket.ConcurrentSlots(1000)},
	} {
		put(t, s, t0, b)
	}
	var all []store.LeaseRecord
	for i := range 60 {
		items := []store.Item{{Dimension: "pa#concurrent", Cost: 1}}
		switch {
		case i%3 == 1:
			items = append(items, store.Item{Dimension: "pa#tpm", Cost: int64(i)})
		case i%3 == 2:
			items = []store.Item{{Dimension: "pb#concurrent", Cost: 1}}
		}
		ttl := time.Duration(1+i%5) * time.Second // ties: 12 leases per expiry
		req := &store.AcquireRequest{Now: t0, Items: items, ID: store.NewLeaseID(), TTL: ttl, Caller: "c"}
		var res store.AcquireResult
		if err := s.Acquire(ctx, req, &res); err != nil || !res.Granted {
			t.Fatalf("acquire %d: %+v %v", i, res, err)
		}
		all = append(all, store.LeaseRecord{ID: req.ID, Caller: "c", CreatedAt: t0, ExpiresAt: res.ExpiresAt, Items: items})
	}
	slices.SortFunc(all, func(a, b store.LeaseRecord) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID.String(), b.ID.String())
	})
	filter := func(keep func(store.LeaseRecord) bool, limit int) []store.LeaseRecord {
		var out []store.LeaseRecord
		for _, l := range all {
			if keep(l) && (limit == 0 || len(out) < limit) {
				out = append(out, l)
			}
		}
		return out
	}
	holds := func(d string) func(store.LeaseRecord) bool {
		return func(l store.LeaseRecord) bool {
			return slices.ContainsFunc(l.Items, func(it store.Item) bool { return it.Dimension == d })
		}
	}
	cut := t0.Add(3 * time.Second)
	expired := func(l store.LeaseRecord) bool { return !l.ExpiresAt.After(cut) }
	every := func(store.LeaseRecord) bool { return true }
	paged := newStoreOn(t, c, WithPrefix(s.prefix))
	paged.leasePage = 7
	h := &scriptHook{}
	c.AddHook(h)
	for _, tc := range []struct {
		name string
		q    store.LeaseQuery
		want []store.LeaseRecord
	}{
		{"all", store.LeaseQuery{Now: t0}, all},
		{"limit 10", store.LeaseQuery{Now: t0, Limit: 10}, filter(every, 10)},
		{"limit 1", store.LeaseQuery{Now: t0, Limit: 1}, filter(every, 1)},
		{"dimension", store.LeaseQuery{Now: t0, Dimension: "pa#tpm"}, filter(holds("pa#tpm"), 0)},
		{"dimension, limit 5", store.LeaseQuery{Now: t0, Dimension: "pa#tpm", Limit: 5}, filter(holds("pa#tpm"), 5)},
		{"expired", store.LeaseQuery{Now: cut, ExpiredOnly: true}, filter(expired, 0)},
		{"expired, other vendor", store.LeaseQuery{Now: cut, ExpiredOnly: true, Dimension: "pb#concurrent"},
			filter(func(l store.LeaseRecord) bool { return expired(l) && holds("pb#concurrent")(l) }, 0)},
		{"no match", store.LeaseQuery{Now: t0, Dimension: "pz#none"}, nil},
	} {
		h.calls.Store(0)
		h.longest.Store(0)
		got, err := paged.Leases(ctx, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !equalLeases(got, tc.want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, leaseIDs(got), leaseIDs(tc.want))
		}
		scanned := len(all)
		if tc.q.ExpiredOnly {
			scanned = len(filter(expired, 0))
		}
		if tc.q.Limit == 0 && h.calls.Load() < int64(scanned/7) {
			t.Errorf("%s: %d script calls for %d records in pages of 7", tc.name, h.calls.Load(), scanned)
		}
		// A page replies with 5 values plus at most 7 leases of 6 + 2×2.
		if n := h.longest.Load(); n > 5+7*10 {
			t.Errorf("%s: a reply of %d values, more than one page of 7", tc.name, n)
		}
		one, err := s.Leases(ctx, tc.q) // pages of leasePage: one call per vendor
		if err != nil || !equalLeases(one, got) {
			t.Errorf("%s: unpaged %s, paged %s (%v)", tc.name, leaseIDs(one), leaseIDs(got), err)
		}
	}
}

func equalLeases(a, b []store.LeaseRecord) bool {
	return slices.EqualFunc(a, b, func(x, y store.LeaseRecord) bool {
		return x.ID == y.ID && x.Caller == y.Caller && x.CreatedAt.Equal(y.CreatedAt) &&
			x.ExpiresAt.Equal(y.ExpiresAt) && x.ValidAt.Equal(y.ValidAt) && slices.Equal(x.Items, y.Items)
	})
}

func leaseIDs(ls []store.LeaseRecord) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "%s@%d ", l.ID.String()[:4], l.ExpiresAt.Sub(t0).Milliseconds())
	}
	return b.String()
}

// TestLeasesLargeListing (SLUICE_LONG=1) records 100,000 leases and logs
// how long the longest single script call of a listing filtered by
// dimension takes: the time the server is blocked
// (docs/reliability-redis.md).
func TestLeasesLargeListing(t *testing.T) {
	if os.Getenv("SLUICE_LONG") == "" {
		t.Skip("SLUICE_LONG=1 runs it")
	}
	c := newClient(t)
	s := newStoreOn(t, c)
	ctx := context.Background()
	put(t, s, t0, store.Bucket{Name: "big#concurrent", Config: bucket.ConcurrentSlots(bucket.MaxCapacity)})
	put(t, s, t0, store.Bucket{Name: "big#other", Config: bucket.ConcurrentSlots(10)})
	const n, workers = 100_000, 16
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				req := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "big#concurrent", Cost: 1}},
					ID: store.NewLeaseID(), TTL: time.Duration(1+i%1000) * time.Second}
				var res store.AcquireResult
				if err := s.Acquire(ctx, req, &res); err != nil || !res.Granted {
					t.Error(res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var longest atomic.Int64
	c.AddHook(timeHook(&longest))
	// Pages of leasePage entries, and one page for everything (as a single
	// unbounded script call did).
	for _, page := range []int{leasePage, n} {
		s.leasePage = page
		for _, q := range []store.LeaseQuery{{Now: t0, Dimension: "big#other"}, {Now: t0, Dimension: "big#other", Limit: 1}, {Now: t0, Limit: 1}} {
			longest.Store(0)
			start := time.Now()
			ls, err := s.Leases(ctx, q)
			if err != nil || len(ls) != 0 && q.Dimension != "" {
				t.Fatal(ls, err)
			}
			t.Logf("%d records, pages of %d, dimension %q limit %d: listing took %v, longest script call %v", n, page,
				q.Dimension, q.Limit, time.Since(start).Round(time.Millisecond), time.Duration(longest.Load()).Round(time.Millisecond))
		}
	}
}

// timeHook records the longest script call's duration in ns.
func timeHook(longest *atomic.Int64) redis.Hook { return &durHook{longest: longest} }

type durHook struct{ longest *atomic.Int64 }

func (h *durHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *durHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		if d := int64(time.Since(start)); isScript(cmd) && d > h.longest.Load() {
			h.longest.Store(d)
		}
		return err
	}
}
func (h *durHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
