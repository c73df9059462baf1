package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/ontopix/sluice/store"
)

// skewRounds is the number of calls each alternating-clocks test makes,
// skewStepMs the true time between two of them: 20 s in all.
const (
	skewRounds = 400
	skewStepMs = 50
)

// testSkew covers callers whose clocks disagree: two hosts alternating on
// one bucket never earn the same refill twice, whatever their offset; a
// caller more than the maximum skew behind is refused admission without
// changing anything, with the wait until its clock is within it; and its
// other operations apply at the bucket's refill timestamp, which never
// moves backwards (as when a slow call reaches the store after another
// process wrote the bucket).
func testSkew(t *testing.T, h Harness) {
	skew := store.DefaultMaxSkew.Milliseconds()
	for _, off := range []int64{skew * 11 / 10, 2 * skew, 10 * skew} {
		t.Run(fmt.Sprintf("AlternatingAcquire/%dms", off), func(t *testing.T) {
			e := newEnv(t, h)
			const dim = "skew#rpm"
			e.put(0, rpm(dim, 40))
			grants, behind, last := int64(0), time.Duration(0), int64(0)
			var tmax int64
			for i := range int64(skewRounds) {
				now := i * skewStepMs
				if i%2 == 1 {
					now += off
				}
				tmax = max(tmax, now)
				res := e.acquire(e.req(now, item(dim, 1)))
				switch {
				case res.Granted:
					grants++
				case res.RetryIn <= 0:
					t.Fatalf("call %d at +%dms denied with RetryIn %s, want above zero", i, now, res.RetryIn)
				}
				behind = max(behind, res.Behind)
				l := e.peek(tmax, dim).LastRefill
				if l < last {
					t.Fatalf("call %d at +%dms moved the refill timestamp back from +%dms to +%dms", i, now, last-At(0).UnixMilli(), l-At(0).UnixMilli())
				}
				last = l
			}
			if allowed := 40 + tmax*40/60_000; grants > allowed {
				t.Errorf("%d grants of %d calls from two clocks %dms apart, want at most %d (capacity + refill up to the fastest clock)",
					grants, skewRounds, off, allowed)
			}
			if behind < time.Duration(skew)*time.Millisecond {
				t.Errorf("largest Behind reported %s, want at least the maximum skew %dms", behind, skew)
			}
		})
		t.Run(fmt.Sprintf("AlternatingReserve/%dms", off), func(t *testing.T) {
			e := newEnv(t, h)
			const dim = "skew#rpm"
			e.put(0, rpm(dim, 40))
			var valid []int64
			var tmax int64
			for i := range int64(skewRounds) {
				now := i * skewStepMs
				if i%2 == 1 {
					now += off
				}
				tmax = max(tmax, now)
				res := e.reserve(now, time.Second, item(dim, 1))
				if res.Granted {
					valid = append(valid, res.ValidAt.Sub(At(0)).Milliseconds())
				} else if res.Wait <= 0 {
					t.Fatalf("call %d at +%dms denied with Wait %s, want above zero", i, now, res.Wait)
				}
			}
			used := int64(0)
			for _, v := range valid {
				if v <= tmax {
					used++
				}
			}
			if allowed := 40 + tmax*40/60_000; used > allowed {
				t.Errorf("%d reservations valid by +%dms from two clocks %dms apart, want at most %d", used, tmax, off, allowed)
			}
		})
	}

	t.Run("SlowCall", func(t *testing.T) {
		// Another process drained the bucket at +10s; a call whose Now
		// was taken 1.5 s earlier reaches the store after it.
		e := newEnv(t, h)
		const dim, tdim = "skew#rpm", "skew#tpm"
		e.put(0, rpm(dim, 60)) // one token a second
		e.put(0, tpm(tdim, 60_000))
		lease := e.req(10_000, item(dim, 60), item(tdim, 1000))
		lease.Record = true
		e.grant(lease)
		before := e.snapshot(10_000)
		res := e.acquire(e.req(8_500, item(dim, 1)))
		if res.Granted || res.RetryIn != time.Second || res.Behind != 1500*time.Millisecond {
			t.Errorf("Acquire 1.5 s behind: granted %t, RetryIn %s, Behind %s; want refused, 1s, 1.5s", res.Granted, res.RetryIn, res.Behind)
		}
		// The wait is the skew's when tokens are there already.
		res = e.acquire(e.req(7_000, item(tdim, 1)))
		if res.Granted || res.RetryIn != 2*time.Second || res.Behind != 3*time.Second {
			t.Errorf("Acquire 3 s behind: granted %t, RetryIn %s, Behind %s; want refused, 2s, 3s", res.Granted, res.RetryIn, res.Behind)
		}
		rr := e.reserve(8_500, 10*time.Second, item(dim, 1))
		if rr.Granted || rr.Wait != time.Second || rr.Behind != 1500*time.Millisecond {
			t.Errorf("Reserve 1.5 s behind: granted %t, Wait %s, Behind %s; want refused, 1s, 1.5s", rr.Granted, rr.Wait, rr.Behind)
		}
		e.unchanged(10_000, before, "an admission refused for its clock")
		// Nothing was earned twice: on time, the bucket is still empty.
		if res := e.acquire(e.req(10_000, item(dim, 1))); res.Granted || res.RetryIn != time.Second {
			t.Errorf("Acquire on time after the slow call: granted %t, RetryIn %s; want denied, 1s", res.Granted, res.RetryIn)
		}
		// Operations that must not be lost apply at the refill timestamp.
		if s := e.settle(8_500, lease.ID, tdim, 500); s.Applied != 500_000 {
			t.Errorf("Adjust 1.5 s behind applied %d millitokens, want 500000", s.Applied)
		}
		if got := e.tokens(10_000, tdim); got != 59_000_000-500_000 {
			t.Errorf("%s holds %d millitokens, want %d", tdim, got, 59_000_000-500_000)
		}
		if r := e.cooldown(8_000, tdim, 9_000); r.Until != At(11_000).UnixMilli() {
			t.Errorf("Cooldown 2 s behind for 1 s ends at +%dms, want +11000ms (from the refill timestamp)", r.Until-At(0).UnixMilli())
		}
		if _, err := e.s.Penalize(e.ctx, store.PenalizeRequest{Now: At(8_500), Dimension: dim, FactorMilli: 500}); err != nil {
			t.Fatalf("Penalize 1.5 s behind: %v", err)
		}
		e.sync(8_500, dim, 0)
		for _, d := range []string{dim, tdim} {
			if st := e.peek(10_000, d); st.LastRefill != At(10_000).UnixMilli() {
				t.Errorf("%s refill timestamp +%dms after the late operations, want +10000ms", d, st.LastRefill-At(0).UnixMilli())
			}
		}
		if res := e.acquire(e.req(11_000, item(dim, 1))); !res.Granted {
			t.Errorf("Acquire on time 1 s later: denied (RetryIn %s), want granted", res.RetryIn)
		}
	})
}

// reserve makes a reservation at ms and fails the test on error.
func (e *env) reserve(ms int64, maxWait time.Duration, items ...store.Item) store.ReserveResult {
	e.t.Helper()
	e.caps.need(e.t, "reserve")
	var res store.ReserveResult
	req := &store.ReserveRequest{Now: At(ms), Items: items, ID: e.id(), Caller: "storetest", TTL: time.Minute, MaxWait: maxWait}
	if err := e.s.Reserve(e.ctx, req, &res); err != nil {
		e.t.Fatalf("Reserve(%v at +%dms): %v", items, ms, err)
	}
	return res
}
