package vendors

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/ontopix/sluice/bucket"
)

// The shapes a profile's dimensions take. Each returns a bucket that is
// never more permissive than its Rule for any window length; the property
// test in profile_property_test.go checks it against the vendor rules
// independently of this code.

// day is a calendar day in the published sense; pacificDay is the longest
// calendar day at midnight Pacific (the day daylight saving time ends).
const (
	day        = 24 * time.Hour
	pacificDay = 25 * time.Hour
)

// mulDiv returns floor(a*b/c) for non-negative a, b and positive c whose
// quotient fits in an int64 (every caller's does: a ≤ 10^15, b ≤ 10^6).
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// stretch returns the window lengthened by the headroom: a bucket that
// refills n per stretch(w) refills n·(1 − headroom) per w. It rounds up,
// so the rate never exceeds the scaled one.
func (b *builder) stretch(w time.Duration) time.Duration {
	ms := w.Milliseconds()
	q := mulDiv(ms, ppm, ppm-b.hp)
	if q*(ppm-b.hp) < ms*ppm {
		q++
	}
	return time.Duration(q) * time.Millisecond
}

// scale returns floor(n·(1 − headroom)).
func (b *builder) scale(n int64) int64 { return mulDiv(n, ppm-b.hp, ppm) }

// perMinuteBurst is the vendor bucket's capacity for a per-minute request
// limit, in thousandths: one second's worth, at least one request.
func perMinuteBurst(rpm int64) int64 { return max(1000, rpm*1000/60) }

// continuous adds a dimension for a vendor that enforces limit n per
// window as a bucket of capacity burstMilli/1000 refilled continuously.
// The profile's bucket holds floor(burst·(1 − headroom)), at least 1,
// and refills n every stretched window.
func (b *builder) continuous(m Metric, typ bucket.LimitType, n int64, window time.Duration, burstMilli int64) {
	if !b.limit(m, n) {
		return
	}
	vendorCap := burstMilli / 1000
	c := max(1, mulDiv(burstMilli, ppm-b.hp, 1000*ppm))
	if v, ok := b.burst(m); ok {
		if v < 1 || v > vendorCap {
			b.fail("burst["+Suffix(m)+"]", v, fmt.Sprintf("must be between 1 and %d, the vendor's own burst for %d per %s", vendorCap, n, windowName(window)))
			return
		}
		c = v
	}
	cfg := bucket.Config{Type: typ, Capacity: c, RefillAmount: n, RefillPeriod: b.stretch(window)}
	if _, set := b.burst(m); !set && typ == bucket.Requests && window <= time.Minute {
		b.requestMargin(&cfg, n, window, burstMilli)
	}
	b.add(m, cfg, n, window, Rule{Kind: ContinuousBucket, Limit: n, Window: window, BurstMilli: burstMilli})
}

// requestMargin makes cfg, a requests bucket refilling n per its period
// under a vendor bucket of burstMilli/1000 requests refilled n per window,
// absorb arrival jitter of up to the profile's margin M. Calls admitted
// at most c + r·(L + M) in any L (r the profile's rate) arrive at most
// that many in L; the vendor admits burst + r·L, so the vendor's spare,
// burst − c, must hold r·M. The capacity is lowered to make room; a
// capacity of one that cannot make room instead spaces requests M further
// apart than the vendor's window/n, so that consecutive ones still reach
// it a full interval apart.
func (b *builder) requestMargin(cfg *bucket.Config, n int64, window time.Duration, burstMilli int64) {
	m := b.opts.margin.Milliseconds()
	if m <= 0 {
		return
	}
	per := cfg.RefillPeriod.Milliseconds()
	need := mulDiv(m*1000, n, per) + 1 // milli-requests earned in M, rounded up
	if burstMilli-cfg.Capacity*1000 >= need {
		return
	}
	if c := (burstMilli - need) / 1000; c >= 1 {
		cfg.Capacity = c
		return
	}
	cfg.Capacity = 1
	if n > (bucket.MaxPeriodMs-window.Milliseconds())/m {
		b.fail("request_margin", b.opts.margin, fmt.Sprintf("spaces %d requests per %s %s apart, longer than the longest refill period (366 days): lower the margin", n, windowName(window), b.opts.margin))
		return
	}
	cfg.RefillPeriod = max(cfg.RefillPeriod, window+time.Duration(n*m)*time.Millisecond)
}

// fixed adds a dimension for a vendor that counts at most n per calendar
// window and resets the count at each boundary. A bucket admits at most
// capacity + refill within one refill period, so the profile keeps
// capacity + refill ≤ floor(n·(1 − headroom)), and the capacity is what
// the steady rate gives up: by default, for a window of a minute, a
// sixtieth of it (a second's worth), and, for tokens, at least
// fixedTokenBurst (a large call's charge must fit) but never more than a
// sixth; for a longer window (a day) a sixth. period is the bucket's
// refill period: the window, or the longest calendar day for a daily
// limit.
func (b *builder) fixed(m Metric, typ bucket.LimitType, n int64, window, period time.Duration) {
	if !b.limit(m, n) {
		return
	}
	total := b.scale(n)
	if total < 2 {
		b.fail(Suffix(m), n, fmt.Sprintf("too small for a fixed window with %.3g headroom: a bucket needs at least 1 of capacity and 1 of refill within the window's %d", b.p.Headroom, n))
		return
	}
	c := max(1, total/6)
	if window <= time.Minute {
		c = max(1, total/60)
		if typ == bucket.Tokens {
			c = max(c, min(total/6, fixedTokenBurst))
		}
	}
	if v, ok := b.burst(m); ok {
		if v < 1 || v > total-1 {
			b.fail("burst["+Suffix(m)+"]", v, fmt.Sprintf("must be between 1 and %d: capacity plus refill may not exceed %d of the %d per calendar %s", total-1, total, n, windowName(window)))
			return
		}
		c = v
	}
	cfg := bucket.Config{Type: typ, Capacity: c, RefillAmount: total - c, RefillPeriod: period}
	b.add(m, cfg, n, window, Rule{Kind: FixedWindow, Limit: n, Window: window})
}

// fixedTokenBurst is the least default capacity, in tokens, of a tokens
// bucket under a calendar-window rule (at most a sixth of the window's
// limit): a call whose charge exceeds the capacity is never granted, and
// a prompt of a few thousand tokens with a max_tokens of 4096 must fit.
const fixedTokenBurst = 8192

// azureRequests adds Azure's requests dimension: rpm requests per minute,
// enforced as at most k = ceil(rpm/60) per calendar second. Requests are
// whole, so a bucket of capacity c refilling r per second admits at most
// floor(c + r) in a second: the profile needs c + r < k + 1, and, within a
// minute, c + 60r < rpm + 1. It refills rpm every stretched minute (at
// least 60.001 s, so that even without headroom r < k) from a capacity
// of 1.
func (b *builder) azureRequests(rpm int64) {
	if !b.limit(Requests, rpm) {
		return
	}
	k := (rpm + 59) / 60
	p := max(b.stretch(time.Minute).Milliseconds(), 60_001)
	// n·p + rpm·1000 < (k+1)·p and n·p + rpm·60000 < (rpm+1)·p.
	limit := min(((k+1)*p-rpm*1000-1)/p, ((rpm+1)*p-rpm*60_000-1)/p)
	c := int64(1)
	if v, ok := b.burst(Requests); ok {
		if v < 1 || v > limit {
			b.fail("burst[rpm]", v, fmt.Sprintf("must be between 1 and %d: Azure admits at most %d requests in a calendar second for %d RPM", limit, k, rpm))
			return
		}
		c = v
	}
	cfg := bucket.Config{Type: bucket.Requests, Capacity: c, RefillAmount: rpm, RefillPeriod: time.Duration(p) * time.Millisecond}
	b.add(Requests, cfg, rpm, time.Minute, Rule{Kind: FixedWindow, Limit: k, Window: time.Second})
}

// slots adds a concurrency dimension of n slots. Headroom does not apply:
// a count of requests in flight has no clock to disagree on.
func (b *builder) slots(n int64) {
	if !b.limit(Concurrent, n) {
		return
	}
	c := n
	if v, ok := b.burst(Concurrent); ok {
		if v < 1 || v > n {
			b.fail("burst[concurrent]", v, fmt.Sprintf("must be between 1 and the vendor's %d slots", n))
			return
		}
		c = v
	}
	b.add(Concurrent, bucket.ConcurrentSlots(c), n, 0, Rule{Kind: Concurrency, Limit: n})
}

func windowName(w time.Duration) string {
	switch w {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case day:
		return "day"
	}
	return w.String()
}
