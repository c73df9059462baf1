package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// badNames are invalid dimension names and a string the error must mention.
var badNames = []struct {
	why, name, mention string
}{
	{"empty", "", "dimension"},
	{"oversized", strings.Repeat("n", store.MaxNameLen+1), strings.Repeat("n", 32)},
	{"control character", "openai#\x01rpm", `openai#\x01rpm`},
	{"DEL", "openai#rpm\x7f", `openai#rpm\x7f`},
	{"invalid UTF-8", "openai#\xffrpm", `openai#\xffrpm`},
	{"brace", "{openai}#rpm", "{openai}#rpm"},
	{"lease# prefix", "lease#openai#rpm", "lease#openai#rpm"},
}

// testBadInput proves that every invalid request fails with the right
// sentinel, names the offending field and value, and changes nothing.
func testBadInput(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.put(0, rpm("openai#rpm", 100))
	e.put(0, tpm("openai#tpm", 1000))
	e.put(0, slots("openai#concurrent", 2))
	held := e.req(0, item("openai#tpm", 100), item("openai#concurrent", 1))
	e.grant(held)
	before := e.snapshot(10)

	acquire := func(mut func(r *store.AcquireRequest)) error {
		r := e.req(10, item("openai#rpm", 1))
		mut(r)
		var res store.AcquireResult
		return e.s.Acquire(e.ctx, r, &res)
	}
	items := func(its ...store.Item) func(*store.AcquireRequest) {
		return func(r *store.AcquireRequest) { r.Items = its }
	}
	tooMany := make([]store.Item, store.MaxItems+1)
	for i := range tooMany {
		tooMany[i] = item("openai#rpm", 1)
	}
	tests := []struct {
		name    string
		err     error
		target  error
		mention []string
	}{
		{"negative cost", acquire(items(item("openai#rpm", -1))), store.ErrInvalid, []string{"cost[openai#rpm]", "-1"}},
		{"huge cost", acquire(items(item("openai#rpm", bucket.MaxCapacity+1))), store.ErrInvalid, []string{"cost[openai#rpm]", "1000000000001"}},
		{"cost above capacity", acquire(items(item("openai#rpm", 101))), store.ErrCostExceedsCapacity, []string{"openai#rpm", "101", "100"}},
		{"duplicate dimension", acquire(items(item("openai#rpm", 1), item("openai#tpm", 1), item("openai#rpm", 2))), store.ErrInvalid, []string{"dimension", "openai#rpm"}},
		{"no items", acquire(items()), store.ErrInvalid, []string{"items"}},
		{"too many items", acquire(items(tooMany...)), store.ErrInvalid, []string{"items", "17"}},
		{"zero TTL", acquire(func(r *store.AcquireRequest) { r.TTL = 0 }), store.ErrInvalid, []string{"ttl", "0s"}},
		{"sub-millisecond TTL", acquire(func(r *store.AcquireRequest) { r.TTL = time.Microsecond }), store.ErrInvalid, []string{"ttl", "1µs"}},
		{"TTL above 24h", acquire(func(r *store.AcquireRequest) { r.TTL = 25 * time.Hour }), store.ErrInvalid, []string{"ttl", "25h0m0s"}},
		{"zero lease id", acquire(func(r *store.AcquireRequest) { r.ID = store.LeaseID{} }), store.ErrInvalid, []string{"lease_id", "00000000-0000-0000-0000-000000000000"}},
		{"negative poll", acquire(func(r *store.AcquireRequest) { r.Poll = -time.Second }), store.ErrInvalid, []string{"poll", "-1s"}},
		{"caller too long", acquire(func(r *store.AcquireRequest) { r.Caller = strings.Repeat("c", store.MaxCallerLen+1) }), store.ErrInvalid, []string{"caller"}},
		{"unknown dimension", acquire(items(item("openai#rpm", 1), item("openai#nope", 1))), store.ErrUnknownDimension, []string{"openai#nope"}},
		{"time before the epoch", acquire(func(r *store.AcquireRequest) { r.Now = time.Unix(-1, 0) }), store.ErrInvalid, []string{"now"}},
	}
	for _, bn := range badNames {
		tests = append(tests, struct {
			name    string
			err     error
			target  error
			mention []string
		}{"acquire: name " + bn.why, acquire(items(item(bn.name, 1))), store.ErrInvalid, []string{"dimension", bn.mention}})
	}

	adjust := func(r store.AdjustRequest) error {
		r.Now = At(10)
		if r.ID.IsZero() {
			r.ID, r.Recorded = held.ID, true
		}
		if r.Dimension == "" {
			r.Dimension = "openai#tpm"
		}
		_, err := e.s.Adjust(e.ctx, r)
		return err
	}
	penalize := func(dim string, f int64) error {
		_, err := e.s.Penalize(e.ctx, store.PenalizeRequest{Now: At(10), Dimension: dim, FactorMilli: f})
		return err
	}
	cool := func(dim string, until time.Time) error {
		_, err := e.s.Cooldown(e.ctx, store.CooldownRequest{Now: At(10), Dimension: dim, Until: until})
		return err
	}
	sync := func(dim string, remaining int64) error {
		_, err := e.s.Sync(e.ctx, store.SyncRequest{Now: At(10), Dimension: dim, Remaining: remaining})
		return err
	}
	extend := func(id store.LeaseID, ttl time.Duration) error {
		_, err := e.s.Extend(e.ctx, store.ExtendRequest{Now: At(10), ID: id, TTL: ttl})
		return err
	}
	peek := func(dims ...string) error {
		_, err := e.s.Peek(e.ctx, store.PeekRequest{Now: At(10), Dimensions: dims})
		return err
	}
	tests = append(tests, []struct {
		name    string
		err     error
		target  error
		mention []string
	}{
		{"adjust: delta 0", adjust(store.AdjustRequest{Delta: 0}), store.ErrInvalid, []string{"delta", "0"}},
		{"adjust: huge delta", adjust(store.AdjustRequest{Delta: -bucket.MaxCapacity - 1}), store.ErrInvalid, []string{"delta", "-1000000000001"}},
		{"adjust: refund above held", adjust(store.AdjustRequest{Delta: -101}), store.ErrInvalid, []string{"delta", "-101"}},
		{"adjust: negative held", adjust(store.AdjustRequest{ID: e.id(), Delta: 1, Held: -5}), store.ErrInvalid, []string{"held", "-5"}},
		{"adjust: unknown lease", adjust(store.AdjustRequest{ID: e.id(), Recorded: true, Delta: 1}), store.ErrUnknownLease, nil},
		{"adjust: unknown dimension", adjust(store.AdjustRequest{Dimension: "openai#nope", Delta: 1}), store.ErrUnknownDimension, []string{"openai#nope"}},
		{"adjust: bad name", adjust(store.AdjustRequest{Dimension: "lease#x", Delta: 1}), store.ErrInvalid, []string{"dimension", "lease#x"}},
		{"penalize: factor above 1", penalize("openai#rpm", 1001), store.ErrInvalid, []string{"factor", "1.001"}},
		{"penalize: negative factor", penalize("openai#rpm", -1), store.ErrInvalid, []string{"factor", "-0.001"}},
		{"penalize: unknown dimension", penalize("openai#nope", 800), store.ErrUnknownDimension, []string{"openai#nope"}},
		{"penalize: bad name", penalize("open{ai}", 800), store.ErrInvalid, []string{"dimension", "open{ai}"}},
		{"cooldown: until now", cool("openai#rpm", At(10)), store.ErrInvalid, []string{"until", "2026-01-01T00:00:00.01Z"}},
		{"cooldown: until in the past", cool("openai#rpm", At(9)), store.ErrInvalid, []string{"until", "2026-01-01T00:00:00.009Z"}},
		{"cooldown: over 24h", cool("openai#rpm", At(10).Add(store.MaxCooldown+time.Millisecond)), store.ErrInvalid, []string{"until", "2026-01-02T00:00:00.011Z"}},
		{"cooldown: concurrent", cool("openai#concurrent", At(1000)), store.ErrInvalid, []string{"dimension", "openai#concurrent"}},
		{"cooldown: unknown dimension", cool("openai#nope", At(1000)), store.ErrUnknownDimension, []string{"openai#nope"}},
		{"cooldown: bad name", cool("open{ai}", At(1000)), store.ErrInvalid, []string{"dimension", "open{ai}"}},
		{"sync: negative remaining", sync("openai#tpm", -1), store.ErrInvalid, []string{"remaining", "-1"}},
		{"sync: huge remaining", sync("openai#tpm", bucket.MaxCapacity+1), store.ErrInvalid, []string{"remaining", "1000000000001"}},
		{"sync: concurrent", sync("openai#concurrent", 0), store.ErrInvalid, []string{"dimension", "openai#concurrent"}},
		{"sync: unknown dimension", sync("openai#nope", 0), store.ErrUnknownDimension, []string{"openai#nope"}},
		{"sync: bad name", sync("lease#x", 0), store.ErrInvalid, []string{"dimension", "lease#x"}},
		{"extend: zero TTL", extend(held.ID, 0), store.ErrInvalid, []string{"ttl", "0s"}},
		{"extend: unknown lease", extend(e.id(), time.Second), store.ErrUnknownLease, nil},
		{"peek: unknown", peek("openai#rpm", "openai#nope"), store.ErrUnknownDimension, []string{"openai#nope"}},
		{"peek: bad name", peek("openai#\x00"), store.ErrInvalid, []string{"dimension"}},
		{"delete: unknown", e.s.DeleteBucket(e.ctx, store.DeleteBucketRequest{Name: "openai#nope"}), store.ErrUnknownDimension, []string{"openai#nope"}},
		{"delete: bad name", e.s.DeleteBucket(e.ctx, store.DeleteBucketRequest{Name: ""}), store.ErrInvalid, []string{"dimension"}},
	}...)

	put := func(b store.Bucket) error {
		return e.s.PutBucket(e.ctx, store.PutBucketRequest{Now: At(10), Bucket: b})
	}
	cfg := func(mut func(c *bucket.Config)) store.Bucket {
		b := rpm("openai#rpm", 100)
		mut(&b.Config)
		return b
	}
	tests = append(tests, []struct {
		name    string
		err     error
		target  error
		mention []string
	}{
		{"put: no type", put(cfg(func(c *bucket.Config) { c.Type = 0 })), store.ErrInvalid, []string{"limit_type"}},
		{"put: zero capacity", put(cfg(func(c *bucket.Config) { c.Capacity = 0 })), store.ErrInvalid, []string{"capacity", "0"}},
		{"put: huge capacity", put(cfg(func(c *bucket.Config) { c.Capacity = bucket.MaxCapacity + 1 })), store.ErrInvalid, []string{"capacity", "1000000000001"}},
		{"put: zero refill", put(cfg(func(c *bucket.Config) { c.RefillAmount = 0 })), store.ErrInvalid, []string{"refill_amount", "0"}},
		{"put: zero period", put(cfg(func(c *bucket.Config) { c.RefillPeriod = 0 })), store.ErrInvalid, []string{"refill_period", "0s"}},
		{"put: fractional ms period", put(cfg(func(c *bucket.Config) { c.RefillPeriod = 1500 * time.Microsecond })), store.ErrInvalid, []string{"refill_period", "1.5ms"}},
		{"put: cost per call above capacity", put(cfg(func(c *bucket.Config) { c.CostPerCall = 101 })), store.ErrInvalid, []string{"cost_per_call", "101"}},
		{"put: negative cost per call", put(cfg(func(c *bucket.Config) { c.CostPerCall = -1 })), store.ErrInvalid, []string{"cost_per_call", "-1"}},
		{"put: bad max debt", put(cfg(func(c *bucket.Config) { c.MaxDebt = -2 })), store.ErrInvalid, []string{"max_debt", "-2"}},
		{"put: too slow", put(cfg(func(c *bucket.Config) {
			c.Capacity, c.RefillAmount, c.RefillPeriod = bucket.MaxCapacity, 1, 366*24*time.Hour
		})), store.ErrInvalid, []string{"refill_amount", "1"}},
		{"put: concurrent with refill", put(store.Bucket{Name: "openai#concurrent", Config: bucket.Config{Type: bucket.Concurrent, Capacity: 2, RefillAmount: 1}}), store.ErrInvalid, []string{"refill_amount", "1"}},
	}...)
	for _, bn := range badNames {
		tests = append(tests, struct {
			name    string
			err     error
			target  error
			mention []string
		}{"put: name " + bn.why, put(rpm(bn.name, 10)), store.ErrInvalid, []string{"dimension", bn.mention}})
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op, _, _ := strings.Cut(tt.name, ":")
			e.caps.need(t, op)
			wantErr(t, tt.name, tt.err, tt.target, tt.mention...)
		})
	}
	e.unchanged(10, before, "the rejected requests")
}
