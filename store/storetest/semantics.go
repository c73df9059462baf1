package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// testAcquire covers the Acquire semantics: grants, exact RETRY_IN,
// all-or-nothing, cost resolution, errors and concurrent dimensions.
func testAcquire(t *testing.T, h Harness) {
	t.Run("GrantReportsEveryField", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, rpm("openai#rpm", 100))
		req := e.req(1500, item("openai#rpm", 1))
		res := e.grant(req)
		want := store.ItemResult{Dimension: "openai#rpm", Type: bucket.Requests, Cost: 1, Capacity: 100, Remaining: 99_000}
		if len(res.Items) != 1 || res.Items[0] != want {
			t.Errorf("Items = %+v, want [%+v]", res.Items, want)
		}
		if res.RetryIn != 0 {
			t.Errorf("RetryIn = %s on a grant, want 0", res.RetryIn)
		}
		if got, want := res.ExpiresAt, At(1500+60_000); !got.Equal(want) {
			t.Errorf("ExpiresAt = %s, want %s", got, want)
		}
		if res.Recorded != h.AlwaysRecords {
			t.Errorf("Recorded = %t for a requests-only grant without Record, want %t", res.Recorded, h.AlwaysRecords)
		}
	})

	t.Run("ExactRetryIn", func(t *testing.T) {
		fast := store.Bucket{Name: "fast#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1_000_000, time.Minute)}
		burst := store.Bucket{Name: "burst#rps", Config: bucket.Config{Type: bucket.Requests, Capacity: 100, RefillAmount: 10, RefillPeriod: time.Second}}
		slow := store.Bucket{Name: "slow#rpd", Config: bucket.Config{Type: bucket.Requests, Capacity: 3, RefillAmount: 7, RefillPeriod: 24 * time.Hour}}
		tests := []struct {
			name  string
			b     store.Bucket
			drain int64 // tokens taken at +0
			cost  int64
			want  time.Duration
		}{
			{"rpm 100/min: one token takes 600ms", rpm("openai#rpm", 100), 100, 1, 600 * time.Millisecond},
			{"rpm 7/min: 60000/7 ms rounds up", rpm("odd#rpm", 7), 7, 1, 8572 * time.Millisecond},
			{"tpm 2000 tokens after draining", tpm("openai#tpm", 10_000), 9_000, 2_000, 6 * time.Second},
			{"fast 1M/min: a 20-token deficit", fast, 1_000_000, 20, 2 * time.Millisecond},
			{"burst above the rate", burst, 100, 15, 1500 * time.Millisecond},
			{"slow 7/day", slow, 3, 2, 24_685_715 * time.Millisecond},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				e := newEnv(t, h)
				e.put(0, tt.b)
				e.grant(e.req(0, item(tt.b.Name, tt.drain)))
				res := e.acquire(e.req(0, item(tt.b.Name, tt.cost)))
				if res.Granted || res.RetryIn != tt.want {
					t.Fatalf("after draining: granted %t, RetryIn %s; want denied, %s", res.Granted, res.RetryIn, tt.want)
				}
				if got := res.Items[0].RetryIn; got != tt.want {
					t.Errorf("item RetryIn = %s, want %s", got, tt.want)
				}
				w := ms(tt.want)
				early := e.acquire(e.req(w-1, item(tt.b.Name, tt.cost)))
				if early.Granted || early.RetryIn != time.Millisecond {
					t.Errorf("1ms early: granted %t, RetryIn %s; want denied, 1ms", early.Granted, early.RetryIn)
				}
				e.grant(e.req(w, item(tt.b.Name, tt.cost)))
			})
		}
	})

	t.Run("AllOrNothing", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, rpm("openai#rpm", 20))
		e.put(0, tpm("openai#tpm", 1000))
		e.put(0, slots("openai#concurrent", 2))
		e.grant(e.req(0, item("openai#tpm", 900)))
		before := e.snapshot(0)
		// rpm and concurrent could grant; tpm is 100 tokens short.
		res := e.acquire(e.req(0, item("openai#rpm", 1), item("openai#concurrent", 1), item("openai#tpm", 200)))
		if res.Granted {
			t.Fatal("granted with openai#tpm 100 tokens short, want denied")
		}
		if want := 6 * time.Second; res.RetryIn != want || res.Items[2].RetryIn != want {
			t.Errorf("RetryIn = %s, item %s; want %s", res.RetryIn, res.Items[2].RetryIn, want)
		}
		wantItems := []store.ItemResult{
			{Dimension: "openai#rpm", Type: bucket.Requests, Cost: 1, Capacity: 20, Remaining: 20_000},
			{Dimension: "openai#concurrent", Type: bucket.Concurrent, Cost: 1, Capacity: 2, Remaining: 2_000},
			{Dimension: "openai#tpm", Type: bucket.Tokens, Cost: 200, Capacity: 1000, Remaining: 100_000, RetryIn: 6 * time.Second},
		}
		for i, want := range wantItems {
			if got := res.Items[i]; got != want {
				t.Errorf("Items[%d] = %+v, want %+v", i, got, want)
			}
		}
		if res.Recorded || !res.ExpiresAt.IsZero() {
			t.Errorf("denial reported Recorded %t, ExpiresAt %s; want false, zero", res.Recorded, res.ExpiresAt)
		}
		e.unchanged(0, before, "a denied multi-dimension acquisition")

		// Two dimensions short: RetryIn is the larger, each item has its own.
		e.grant(e.req(0, item("openai#rpm", 20)))
		res = e.acquire(e.req(0, item("openai#tpm", 200), item("openai#rpm", 1))) // longest wait first
		if res.Granted || res.RetryIn != 6*time.Second || res.Items[0].RetryIn != 6*time.Second || res.Items[1].RetryIn != 3*time.Second {
			t.Errorf("two short: granted %t, RetryIn %s, items %s/%s; want denied, 6s, 6s/3s",
				res.Granted, res.RetryIn, res.Items[0].RetryIn, res.Items[1].RetryIn)
		}
		e.grant(e.req(6000, item("openai#rpm", 1), item("openai#tpm", 200)))
	})

	t.Run("CrossVendor", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, rpm("openai#rpm", 10))
		e.put(0, slots("anthropic#concurrent", 2))
		req := e.req(0, item("openai#rpm", 1), item("anthropic#concurrent", 1))
		if !h.SingleVendorAcquire {
			if res := e.grant(req); !res.Recorded {
				t.Errorf("Acquire(%v) = %+v, want a recorded grant", req.Items, res)
			}
			e.wantTokens(0, "openai#rpm", 9000)
			e.wantTokens(0, "anthropic#concurrent", 1000)
			return
		}
		before := e.snapshot(0)
		var res store.AcquireResult
		err := e.s.Acquire(e.ctx, req, &res)
		wantErr(t, "Acquire across vendors on a single-vendor store", err, store.ErrInvalid)
		e.unchanged(0, before, "a rejected cross-vendor acquisition")
	})

	t.Run("CostZeroIsCostPerCall", func(t *testing.T) {
		e := newEnv(t, h)
		b := rpm("svc#rpm", 100)
		b.CostPerCall = 5
		e.put(0, b)
		e.put(0, rpm("svc#default", 100))
		res := e.grant(e.req(0, item("svc#rpm", 0), item("svc#default", 0)))
		if got := res.Items[0]; got.Cost != 5 || got.Remaining != 95_000 {
			t.Errorf("cost_per_call 5: Cost %d, Remaining %d; want 5, 95000", got.Cost, got.Remaining)
		}
		if got := res.Items[1]; got.Cost != 1 || got.Remaining != 99_000 {
			t.Errorf("default cost_per_call: Cost %d, Remaining %d; want 1, 99000", got.Cost, got.Remaining)
		}
	})

	t.Run("CostAboveCapacity", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, rpm("openai#rpm", 100))
		e.put(0, tpm("openai#tpm", 1000))
		before := e.snapshot(0)
		var res store.AcquireResult
		err := e.s.Acquire(e.ctx, e.req(0, item("openai#rpm", 1), item("openai#tpm", 1001)), &res)
		wantErr(t, "cost 1001 > capacity 1000", err, store.ErrCostExceedsCapacity, "openai#tpm", "1001", "1000")
		var ce *store.CostError
		if !errors.As(err, &ce) || *ce != (store.CostError{Dimension: "openai#tpm", Cost: 1001, Capacity: 1000}) {
			t.Errorf("error = %#v, want *store.CostError{openai#tpm 1001 1000}", err)
		}
		e.unchanged(0, before, "a cost above capacity")
	})

	t.Run("UnknownDimension", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, rpm("openai#rpm", 100))
		before := e.snapshot(0)
		var res store.AcquireResult
		err := e.s.Acquire(e.ctx, e.req(0, item("openai#rpm", 1), item("openai#nope", 1)), &res)
		wantErr(t, "unknown dimension", err, store.ErrUnknownDimension, "openai#nope")
		var ce *store.ConfigurationError
		if !errors.As(err, &ce) || ce.Dimension != "openai#nope" {
			t.Errorf("error = %#v, want *store.ConfigurationError{openai#nope}", err)
		}
		e.unchanged(0, before, "an unknown dimension")
	})

	t.Run("ConcurrentAlwaysRecorded", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("eleven#concurrent", 2))
		e.put(0, rpm("eleven#rpm", 100))
		req := e.req(0, item("eleven#rpm", 1), item("eleven#concurrent", 1))
		res := e.grant(req)
		if !res.Recorded {
			t.Error("Recorded = false for a concurrent grant, want true")
		}
		ls, err := e.s.Leases(e.ctx, store.LeaseQuery{Now: At(0)})
		if err != nil || len(ls) != 1 || ls[0].ID != req.ID {
			t.Fatalf("Leases = %+v, %v; want the one lease %s", ls, err, req.ID)
		}
		e.wantTokens(0, "eleven#concurrent", 1_000)
		rel, err := e.s.Release(e.ctx, store.ReleaseRequest{Now: At(10), ID: req.ID})
		want := []store.Restored{{Dimension: "eleven#concurrent", Cost: 1}}
		if err != nil || !rel.Released || !equalRestored(rel.Restored, want) {
			t.Errorf("Release = %+v, %v; want Released, restored %+v", rel, err, want)
		}
		e.wantTokens(10, "eleven#concurrent", 2_000)
		e.wantTokens(10, "eleven#rpm", 99_016) // requests keep their cost; 10 ms refilled 16
		rel, err = e.s.Release(e.ctx, store.ReleaseRequest{Now: At(20), ID: req.ID})
		if err != nil || rel.Released || len(rel.Restored) != 0 {
			t.Errorf("second Release = %+v, %v; want Released false, nothing restored, nil error", rel, err)
		}
		e.wantTokens(20, "eleven#concurrent", 2_000)
	})

	t.Run("RecordOnRequest", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, tpm("openai#tpm", 1000))
		req := e.req(0, item("openai#tpm", 10))
		req.Record = true
		if res := e.grant(req); !res.Recorded {
			t.Error("Recorded = false with Record set, want true")
		}
		if st := e.peek(0, "openai#tpm"); st.ActiveLeases != 1 {
			t.Errorf("ActiveLeases = %d, want 1", st.ActiveLeases)
		}
		rel, err := e.s.Release(e.ctx, store.ReleaseRequest{Now: At(1), ID: req.ID})
		if err != nil || !rel.Released || len(rel.Restored) != 0 {
			t.Errorf("Release = %+v, %v; want Released with nothing restored", rel, err)
		}
		e.wantTokens(1, "openai#tpm", 990_000+16) // 1 ms of refill at 1000/min
	})

	t.Run("ConcurrentDenialHint", func(t *testing.T) {
		tests := []struct {
			name     string
			ttl      time.Duration // of the holding lease, acquired at +0
			poll     time.Duration
			at       int64
			wantHint time.Duration
		}{
			{"capped by the default poll", 5 * time.Second, 0, 0, store.DefaultPoll},
			{"earliest expiry sooner than poll", 5 * time.Second, 10 * time.Second, 1000, 4 * time.Second},
			{"expiry 1ms away", 5 * time.Second, 0, 4999, time.Millisecond},
			{"custom poll", 5 * time.Second, 250 * time.Millisecond, 0, 250 * time.Millisecond},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				e := newEnv(t, h)
				e.put(0, slots("eleven#concurrent", 1))
				hold := e.req(0, item("eleven#concurrent", 1))
				hold.TTL = tt.ttl
				e.grant(hold)
				req := e.req(tt.at, item("eleven#concurrent", 1))
				req.Poll = tt.poll
				res := e.acquire(req)
				if res.Granted || res.RetryIn != tt.wantHint || res.Items[0].RetryIn != tt.wantHint {
					t.Errorf("granted %t, RetryIn %s, item %s; want denied, %s", res.Granted, res.RetryIn, res.Items[0].RetryIn, tt.wantHint)
				}
			})
		}
		t.Run("expired but not reclaimed: never zero", func(t *testing.T) {
			e := newEnv(t, h)
			e.put(0, slots("eleven#concurrent", 1))
			hold := e.req(0, item("eleven#concurrent", 1))
			hold.TTL = time.Second
			e.grant(hold)
			res := e.acquire(e.req(5000, item("eleven#concurrent", 1)))
			if res.Granted || res.RetryIn <= 0 || res.RetryIn > store.DefaultPoll {
				t.Errorf("granted %t, RetryIn %s; want denied, 0 < RetryIn <= %s", res.Granted, res.RetryIn, store.DefaultPoll)
			}
		})
	})

	t.Run("ResultReused", func(t *testing.T) {
		e := newEnv(t, h)
		d := e.dims("rpm", "a", "b", "c")
		for _, n := range d {
			e.put(0, rpm(n, 10))
		}
		var res store.AcquireResult
		for _, items := range [][]store.Item{
			{item(d[0], 1), item(d[1], 1), item(d[2], 1)},
			{item(d[1], 10)},
			{item(d[2], 1)},
		} {
			if err := e.s.Acquire(e.ctx, e.req(0, items...), &res); err != nil {
				t.Fatal(err)
			}
			if len(res.Items) != len(items) || res.Items[0].Dimension != items[0].Dimension {
				t.Errorf("reused result: Items = %+v, want %d items starting with %q", res.Items, len(items), items[0].Dimension)
			}
		}
		if !res.Granted || res.Items[0].Remaining != 8_000 {
			t.Errorf("last result = %+v, want granted with 8000 remaining", res)
		}
	})
}

// equalRestored compares Restored lists regardless of order.
func equalRestored(got, want []store.Restored) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if g == w {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
