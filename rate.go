package sluice

import (
	"time"

	"github.com/ontopix/sluice/bucket"
)

// RateOption adjusts the config PerMinute or PerPeriod returns.
type RateOption func(*bucket.Config)

// Burst sets a rate's capacity, the most a full bucket holds, apart from
// its refill: the bucket still earns the rate's n tokens per period, but
// holds at most capacity tokens. A capacity below n smooths the rate: a
// bucket of capacity C refilling R per period admits at most C + R·w/period
// in any window of length w, so PerMinute(Requests, 500, Burst(50)) admits
// at most 550 requests in any one-minute window and sustains 500 a minute,
// whereas a full PerMinute(Requests, 500) can admit 1000 in one minute: its
// 500 at once, then the 500 it earns. A capacity above n allows larger
// bursts after idle time. capacity must be 1 to 10^12 tokens and at least
// the bucket's cost per call; PutBucket rejects anything else with a
// *FieldError naming "capacity". The debt a bucket may go into (MaxDebt)
// defaults to its capacity.
func Burst(capacity int64) RateOption {
	return func(c *bucket.Config) { c.Capacity = capacity }
}

// PerMinute returns a bucket config for a vendor's "n per minute" limit of
// type t (Requests or Tokens): it earns n tokens per minute and holds n,
// or the capacity a Burst option gives.
//
// A bucket of capacity C refilling R per period admits at most
// C + R·w/period in any window of length w: a full PerMinute(t, n) bucket
// can admit 2n in one minute (its n at once, then the n it earns). When a
// vendor counts its limit over a sliding minute, give a smaller Burst, e.g.
// PerMinute(Requests, 500, Burst(50)), which admits at most 550 in any
// minute window and sustains 500 a minute.
func PerMinute(t LimitType, n int64, opts ...RateOption) bucket.Config {
	return PerPeriod(t, n, time.Minute, opts...)
}

// PerPeriod returns a bucket config earning n tokens every period and
// holding n, or the capacity a Burst option gives. A bucket of capacity C
// refilling R per period admits at most C + R·w/period in any window of
// length w, so a full PerPeriod(t, n, p) bucket can admit 2n within one
// period p (see Burst).
func PerPeriod(t LimitType, n int64, period time.Duration, opts ...RateOption) bucket.Config {
	c := bucket.PerPeriod(t, n, period)
	for _, o := range opts {
		o(&c)
	}
	return c
}
