package storetest

import (
	"fmt"

	"github.com/ontopix/sluice/bucket"
)

// Step builders for the scenarios; expectations are filled in by the model.

func putB(at int64, name, typ string, capacity, amount, periodMs int64) Step {
	return Step{AtMs: at, Op: "put_bucket", Bucket: &BucketSpec{Name: name, LimitType: typ, Capacity: capacity, RefillAmount: amount, RefillPeriodMs: periodMs}}
}

func putSpec(at int64, b BucketSpec, reset bool) Step {
	return Step{AtMs: at, Op: "put_bucket", Bucket: &b, Reset: reset}
}

func acq(at int64, lease string, ttlMs int64, record bool, items ...ItemSpec) Step {
	return Step{AtMs: at, Op: "acquire", Lease: lease, TTLMs: ttlMs, Record: record, Items: items}
}

func it(dim string, cost int64) ItemSpec { return ItemSpec{Dimension: dim, Cost: cost} }

func release(at int64, lease string) Step { return Step{AtMs: at, Op: "release", Lease: lease} }

func adjust(at int64, lease, dim string, delta int64) Step {
	return Step{AtMs: at, Op: "adjust", Lease: lease, Dimension: dim, Delta: delta}
}

func extend(at int64, lease string, ttlMs int64) Step {
	return Step{AtMs: at, Op: "extend", Lease: lease, TTLMs: ttlMs}
}

func penalize(at int64, dim string, factor int64) Step {
	return Step{AtMs: at, Op: "penalize", Dimension: dim, FactorMilli: factor}
}

func cooldown(at int64, dim string, ms int64) Step {
	return Step{AtMs: at, Op: "cooldown", Dimension: dim, CooldownMs: ms}
}

func syncB(at int64, dim string, remaining int64) Step {
	return Step{AtMs: at, Op: "sync", Dimension: dim, Remaining: remaining}
}

func peek(at int64, dims ...string) Step { return Step{AtMs: at, Op: "peek", Dimensions: dims} }

func reconcileAt(at int64) Step { return Step{AtMs: at, Op: "reconcile"} }

const baseMs = 1_767_225_600_000 // 2026-01-01T00:00:00Z

// scenarios are the hand-written golden scenarios, in file order.
func scenarios() []Vector {
	v := func(name, desc string, steps ...[]Step) Vector {
		var all []Step
		for _, s := range steps {
			all = append(all, s...)
		}
		return Vector{Name: name, Description: desc, BaseMs: baseMs, Steps: all}
	}
	s := func(steps ...Step) []Step { return steps }
	const rpm, tpm, conc = "openai#rpm", "openai#tpm", "elevenlabs#concurrent"
	const oconc, conc2 = "openai#concurrent", "elevenlabs#concurrent-b" // conc's vendor mates

	var drain []Step // the SDKs' example: 100 requests per minute, cost 1
	for i := range 100 {
		drain = append(drain, acq(int64(i*10), fmt.Sprintf("D%d", i), 60_000, false, it(rpm, 1)))
	}

	var fast []Step // 1M tokens/min = 16666.67 millitokens per ms
	for i := range 300 {
		cost := int64(25)
		if i >= 200 {
			cost = 16 // below the rate: the bucket recovers
		}
		fast = append(fast, acq(int64(i), fmt.Sprintf("F%d", i), 1000, false, it("fast#tpm", cost)))
		if i%50 == 49 {
			fast = append(fast, peek(int64(i), "fast#tpm"))
		}
	}

	return []Vector{
		v("openai-rpm", "the SDKs' example: openai#rpm, capacity 100, refill 100/min, cost 1; drain, exact retry-in, refill",
			s(putB(0, rpm, "requests", 100, 100, 60_000)), drain, s(
				acq(990, "X1", 60_000, false, it(rpm, 1)),
				peek(990, rpm),
				acq(1599, "X2", 60_000, false, it(rpm, 1)),
				acq(1600, "X3", 60_000, false, it(rpm, 1)),
				acq(1600, "X4", 60_000, false, it(rpm, 0)),
				acq(2199, "X5", 60_000, false, it(rpm, 0)),
				acq(2200, "X6", 60_000, false, it(rpm, 0)),
				acq(2200, "X7", 60_000, false, it(rpm, 101)),
				acq(2200, "X8", 60_000, false, it("openai#nope", 1)),
				acq(62_200, "X9", 60_000, false, it(rpm, 100)),
				peek(122_200, rpm),
			)),
		v("tpm-adjust-debt", "TPM reserve 2000, Adjust +600 into debt and -700 out of it, refill repays debt; recorded and unrecorded leases",
			s(
				putB(0, tpm, "tokens", 2000, 2000, 60_000),
				acq(0, "L1", 60_000, true, it(tpm, 2000)),
				adjust(100, "L1", tpm, 600),
				peek(100, tpm),
				adjust(200, "L1", tpm, -700),
				adjust(300, "L1", tpm, -1901),
				adjust(300, "L1", tpm, 2500),
				peek(30_000, tpm),
				acq(30_000, "L2", 60_000, false, it(tpm, 500)),
				acq(75_299, "L2", 60_000, false, it(tpm, 500)),
				acq(75_300, "L2", 60_000, false, it(tpm, 500)),
				adjust(76_000, "L2", tpm, -200),
				adjust(76_000, "L1", tpm, -100),
				adjust(76_000, "L2", tpm, 0),
				adjust(76_000, "L2", tpm, -301),
				adjust(135_299, "L2", tpm, 100),
				adjust(135_300, "L2", tpm, 100),
				release(135_300, "L2"),
				peek(200_000, tpm),
			)),
		v("concurrent-lifecycle", "concurrent acquire, denial hints, release once, extend, expiry and reconcile",
			s(
				putB(0, conc, "concurrent", 2, 0, 0),
				acq(0, "C1", 10_000, false, it(conc, 1)),
				acq(0, "C2", 5_000, false, it(conc, 1)),
				acq(100, "C3", 10_000, false, it(conc, 1)),
				Step{AtMs: 100, Op: "acquire", Lease: "C3", TTLMs: 10_000, PollMs: 10_000, Items: []ItemSpec{it(conc, 1)}},
				peek(100, conc),
				release(200, "C1"),
				release(300, "C1"),
				acq(400, "C3", 10_000, false, it(conc, 1)),
				extend(1000, "C3", 20_000),
				peek(1000, conc),
				extend(5000, "C2", 1000),
				release(5000, "C2"),
				reconcileAt(5000),
				peek(5000, conc),
				reconcileAt(5000),
				release(5001, "C2"),
				extend(5001, "C2", 1000),
				extend(5001, "C9", 1000),
				reconcileAt(21_000),
				peek(21_000, conc),
			)),
		// One vendor throughout, so that stores taking single-vendor
		// acquisitions only (Harness.SingleVendorAcquire) replay it too.
		v("multi-dimension", "all-or-nothing: one dimension short, nothing consumed; retry-in is the max; cost and unknown-dimension errors change nothing",
			s(
				putB(0, rpm, "requests", 3, 3, 60_000),
				putB(0, tpm, "tokens", 1000, 1000, 60_000),
				putB(0, oconc, "concurrent", 1, 0, 0),
				acq(0, "M1", 60_000, false, it(rpm, 1), it(tpm, 900)),
				acq(0, "M2", 60_000, false, it(rpm, 1), it(oconc, 1), it(tpm, 200)),
				peek(0, rpm, tpm, oconc),
				acq(0, "M2", 60_000, false, it(rpm, 2), it(tpm, 100)),
				acq(0, "M3", 60_000, false, it(rpm, 1), it(tpm, 1)),
				acq(0, "M3", 60_000, false, it(rpm, 1), it(tpm, 1001)),
				acq(0, "M3", 60_000, false, it(tpm, 1), it("openai#nope", 1)),
				acq(0, "M3", 60_000, false, it(tpm, 1), it(tpm, 1)),
				peek(0, rpm, tpm, oconc),
				acq(20_000, "M3", 60_000, false, it(rpm, 1), it(tpm, 333), it(oconc, 0)),
				peek(20_000, rpm, tpm, oconc),
			)),
		v("burst", "capacity above the refill amount: a burst of 100, then 10 per second",
			s(
				putB(0, "burst#rps", "requests", 100, 10, 1000),
				acq(0, "B1", 1000, false, it("burst#rps", 100)),
				acq(0, "B2", 1000, false, it("burst#rps", 1)),
				acq(100, "B2", 1000, false, it("burst#rps", 1)),
				acq(100, "B3", 1000, false, it("burst#rps", 10)),
				acq(1099, "B3", 1000, false, it("burst#rps", 10)),
				acq(1100, "B3", 1000, false, it("burst#rps", 10)),
				peek(5000, "burst#rps"),
				peek(20_000, "burst#rps"),
			)),
		v("penalize", "penalize multiplies a refilled positive balance; debt is left alone; concurrent is rejected",
			s(
				putB(0, rpm, "requests", 100, 100, 60_000),
				putB(0, tpm, "tokens", 1000, 1000, 60_000),
				putB(0, conc, "concurrent", 3, 0, 0),
				acq(0, "P1", 60_000, false, it(rpm, 40)),
				penalize(3000, rpm, 800),
				peek(3000, rpm),
				penalize(3000, rpm, 0),
				acq(3000, "P2", 60_000, false, it(rpm, 1)),
				acq(3600, "P2", 60_000, false, it(rpm, 1)),
				acq(0, "P3", 60_000, true, it(tpm, 1000)),
				adjust(0, "P3", tpm, 500),
				penalize(1000, tpm, 500),
				penalize(1000, conc, 800),
				penalize(1000, rpm, 1001),
				penalize(1000, "openai#nope", 800),
			)),
		v("fast-rate", "1,000,000 tokens/min with grants 1 ms apart: catches drift-compensation bugs",
			s(putB(0, "fast#tpm", "tokens", 1000, 1_000_000, 60_000)), fast),
		v("reconcile", "reconcile: capacity guard after a reset, orphans after delete, time-based records deleted without restoring, idempotence",
			s(
				putB(0, conc, "concurrent", 2, 0, 0),
				putB(0, conc2, "concurrent", 2, 0, 0),
				putB(0, tpm, "tokens", 1000, 1000, 60_000),
				acq(0, "R1", 1000, false, it(conc, 1)),
				acq(0, "R2", 1000, false, it(conc, 1), it(conc2, 2)),
				acq(0, "R3", 1000, false, it(conc2, 0)),
				acq(0, "R4", 1000, true, it(tpm, 100)),
				putSpec(500, BucketSpec{Name: conc, LimitType: "concurrent", Capacity: 2}, true),
				Step{AtMs: 600, Op: "delete_bucket", Name: conc2},
				reconcileAt(999),
				reconcileAt(1000),
				peek(1000, conc, tpm),
				reconcileAt(1000),
				acq(1000, "R5", 1000, false, it(conc2, 1)),
				putB(1100, conc2, "concurrent", 2, 0, 0),
				peek(1100, conc2),
				Step{AtMs: 1100, Op: "delete_bucket", Name: "missing#x"},
			)),
		v("settle-after-clamp", "a charge the debt floor clamps raises the lease's cost only by what it took, so settling to zero refunds no more than was charged",
			s(
				putSpec(0, BucketSpec{Name: tpm, LimitType: "tokens", Capacity: 1000, RefillAmount: 1000, RefillPeriodMs: 60_000, MaxDebt: 1000}, false),
				acq(0, "other", 60_000, false, it(tpm, 400)),
				acq(0, "L", 60_000, true, it(tpm, 500)),
				adjust(0, "L", tpm, 1500),
				adjust(0, "L", tpm, -1600),
				acq(0, "big", 60_000, false, it(tpm, 1000)),
				peek(0, tpm),
			)),
		v("late-usage", "after a lease expires a charge still counts (into debt) and a refund is refused",
			s(
				putB(0, tpm, "tokens", 1000, 1000, 60_000),
				acq(0, "R", 1000, true, it(tpm, 300)),
				acq(0, "U", 1000, false, it(tpm, 300)),
				adjust(5000, "R", tpm, 200),
				adjust(5000, "R", tpm, -100),
				adjust(5000, "U", tpm, 700),
				adjust(5000, "U", tpm, -100),
				peek(5000, tpm),
				reconcileAt(5000),
				adjust(5000, "R", tpm, 100),
			)),
		v("lease-id-reuse", "a retried acquisition is answered as the grant it was; a lease id reused for another request is refused; after release the id is free",
			s(
				putB(0, rpm, "requests", 10, 10, 60_000),
				putB(0, tpm, "tokens", 1000, 1000, 60_000),
				putB(0, oconc, "concurrent", 2, 0, 0),
				acq(0, "A", 60_000, false, it(oconc, 1), it(tpm, 100)),
				acq(10, "A", 30_000, false, it(tpm, 100), it(oconc, 1)),
				acq(10, "A", 60_000, false, it(oconc, 1), it(tpm, 101)),
				acq(10, "A", 60_000, false, it(oconc, 1)),
				acq(10, "A", 60_000, false, it(oconc, 1), it(rpm, 1)),
				acq(10, "A", 60_000, false, it(conc, 1)),
				acq(0, "B", 60_000, true, it(rpm, 0)),
				acq(20, "B", 60_000, true, it(rpm, 1)),
				peek(20, rpm, tpm, oconc),
				release(30, "A"),
				acq(40, "A", 60_000, false, it(oconc, 1), it(tpm, 50)),
				peek(40, tpm, oconc),
			)),
		v("type-change", "a bucket's limit type changes to or from concurrent only by delete and re-create; requests and tokens interchange",
			s(
				putB(0, oconc, "concurrent", 2, 0, 0),
				acq(0, "C1", 60_000, false, it(oconc, 1)),
				acq(0, "C2", 60_000, false, it(oconc, 1)),
				putB(100, oconc, "requests", 2, 2, 60_000),
				putSpec(100, BucketSpec{Name: oconc, LimitType: "requests", Capacity: 2, RefillAmount: 2, RefillPeriodMs: 60_000}, true),
				putB(200, oconc, "concurrent", 2, 0, 0),
				acq(200, "C3", 60_000, false, it(oconc, 1)),
				peek(200, oconc),
				putB(300, rpm, "requests", 10, 10, 60_000),
				acq(300, "Q1", 60_000, false, it(rpm, 4)),
				putB(400, rpm, "tokens", 10, 10, 60_000),
				peek(400, rpm),
				putB(500, rpm, "concurrent", 10, 0, 0),
			)),
		v("clock-skew", "a caller slightly behind decides at the bucket's time; one far behind is refused admission until its clock is within the maximum skew, and its other operations apply at the bucket's time, which never moves backwards",
			s(
				putB(10_000, rpm, "requests", 60, 60, 60_000),
				acq(10_000, "S1", 60_000, false, it(rpm, 60)),
				acq(9_990, "S2", 60_000, false, it(rpm, 1)),
				acq(10_990, "S3", 60_000, false, it(rpm, 1)),
				acq(11_000, "S4", 60_000, false, it(rpm, 1)),
				acq(3_600_000+11_000, "F1", 60_000, false, it(rpm, 60)),
				acq(12_000, "S5", 60_000, false, it(rpm, 1)),
				peek(12_000, rpm),
				acq(13_000, "S6", 60_000, false, it(rpm, 1)),
				peek(13_000, rpm),
				penalize(12_500, rpm, 500),
				putB(12_900, rpm, "requests", 120, 60, 60_000),
				peek(13_000, rpm),
			)),
		v("cooldown", "a cooldown empties a positive balance, grants nothing before its end and one at a time from then on; debt is kept; a refund lifts at most to zero; a later end is never shortened; a reset ends it; a caller slightly behind cools from the bucket's time",
			s(
				putB(0, rpm, "requests", 100, 100, 60_000),
				putB(0, tpm, "tokens", 1000, 1000, 60_000),
				putB(0, oconc, "concurrent", 3, 0, 0),
				acq(0, "T", 60_000, true, it(tpm, 300)),
				adjust(0, "T", tpm, 900),
				cooldown(0, tpm, 10_000),
				adjust(100, "T", tpm, -1000),
				acq(0, "A", 60_000, false, it(rpm, 40)),
				cooldown(1000, rpm, 5000),
				peek(1000, rpm, tpm),
				acq(1000, "B", 60_000, false, it(rpm, 1), it(tpm, 1)),
				acq(5999, "B", 60_000, false, it(rpm, 1)),
				acq(6000, "B", 60_000, false, it(rpm, 1)),
				acq(6599, "B", 60_000, false, it(rpm, 1)),
				acq(6600, "B", 60_000, false, it(rpm, 1)),
				acq(6600, "C", 60_000, false, it(rpm, 1)),
				peek(6600, rpm),
				cooldown(6600, rpm, 2000),
				cooldown(6700, rpm, 1000),
				cooldown(6700, oconc, 1000),
				cooldown(6700, "openai#nope", 1000),
				cooldown(6700, rpm, 0),
				cooldown(6700, rpm, -5),
				cooldown(6700, rpm, 86_400_001),
				acq(8000, "C", 60_000, false, it(rpm, 1)),
				cooldown(8000, rpm, 86_400_000),
				peek(10_060, rpm, tpm),
				adjust(10_060, "T", tpm, -200),
				putB(11_000, rpm, "requests", 50, 50, 60_000),
				peek(11_000, rpm),
				putSpec(12_000, BucketSpec{Name: rpm, LimitType: "requests", Capacity: 100, RefillAmount: 100, RefillPeriodMs: 60_000}, true),
				peek(12_000, rpm),
				acq(12_000, "D", 60_000, false, it(rpm, 100)),
				cooldown(11_995, rpm, 1000),
				peek(13_000, rpm),
				acq(13_600, "E", 60_000, false, it(rpm, 1)),
			)),
		v("sync", "sync lowers a refilled balance to what the vendor reports, never raises it, keeps debt and a cooldown; concurrent, unknown and out-of-range are rejected",
			s(
				putB(0, rpm, "requests", 100, 100, 60_000),
				putB(0, tpm, "tokens", 1000, 1000, 60_000),
				putB(0, oconc, "concurrent", 2, 0, 0),
				acq(0, "T", 60_000, true, it(tpm, 1000)),
				adjust(0, "T", tpm, 500),
				syncB(0, tpm, 0),
				syncB(0, rpm, 40),
				acq(0, "A", 60_000, false, it(rpm, 41)),
				acq(0, "A", 60_000, false, it(rpm, 40)),
				syncB(6000, rpm, 50),
				syncB(6000, rpm, 5),
				syncB(6000, rpm, 0),
				peek(6000, rpm, tpm),
				syncB(6000, rpm, 100),
				cooldown(7000, rpm, 3000),
				syncB(7100, rpm, 0),
				syncB(7100, oconc, 1),
				syncB(7100, "openai#nope", 1),
				syncB(7100, rpm, -1),
				syncB(7100, rpm, 1_000_000_000_001),
				peek(7100, rpm, tpm),
				acq(10_600, "B", 60_000, false, it(rpm, 1)),
			)),
		v("reserve-cancel", "reservations debit now and are valid at the exact instant the balance covers them; a too-long wait changes nothing; cancelling the latest gives all back, an earlier one only what later ones did not rely on, one in use nothing; clamps never raise reserved debt",
			s(
				putB(0, tpm, "tokens", 1000, 1000, 60_000), // 1000 tokens/min: 60 ms per token
				putB(0, rpm, "requests", 10, 10, 1000),
				putB(0, oconc, "concurrent", 1, 0, 0),
				resv(0, "R1", 60_000, false, 0, it(tpm, 800)),
				resv(0, "R2", 60_000, false, 60_000, it(tpm, 500)),
				resv(0, "R3", 60_000, true, 60_000, it(tpm, 200)),
				resv(0, "TOO", 60_000, false, 10_000, it(tpm, 100)),
				resv(0, "ZERO", 60_000, false, 0, it(tpm, 1)),
				resv(0, "C", 60_000, false, 60_000, it(oconc, 1)),
				peek(0, tpm),
				adjust(1000, "R1", tpm, 5000),
				cancelR(2000, "R2"),
				cancelR(2000, "R3"),
				cancelR(2000, "R3"),
				peek(2000, tpm),
				cancelR(2000, "R1"),
				cancelR(2000, "NEVER"),
				putSpec(3000, BucketSpec{Name: tpm, LimitType: "tokens", Capacity: 1000, RefillAmount: 1000, RefillPeriodMs: 60_000, MaxDebt: bucket.NoDebt}, false),
				peek(3000, tpm),
				acq(3000, "A", 60_000, false, it(tpm, 1)),
			)),
		v("reserve-multi", "a reservation of several dimensions is valid at the latest item's instant, all or nothing; the bucket that waits less is held so it cannot burst at that instant; a recorded reservation is a lease, replayed on retry, cancelled once",
			s(
				putB(0, tpm, "tokens", 1000, 1000, 60_000),
				putB(0, rpm, "requests", 10, 10, 1000),
				acq(0, "A", 60_000, false, it(tpm, 900)),
				resv(0, "M", 30_000, true, 60_000, it(rpm, 2), it(tpm, 400)),
				resv(10, "M", 30_000, true, 60_000, it(tpm, 400), it(rpm, 2)),
				resv(10, "M", 30_000, true, 60_000, it(tpm, 401), it(rpm, 2)),
				peek(10, rpm, tpm),
				acq(20, "B", 60_000, false, it(rpm, 10)),
				resv(20, "N", 30_000, false, 1000, it(rpm, 1), it(tpm, 1)),
				acq(20, "L", 60_000, true, it(rpm, 1)),
				cancelR(30, "L"),
				cancelR(1000, "M"),
				cancelR(1000, "M"),
				peek(1000, rpm, tpm),
			)),
		v("queue-fifo", "waiters on a concurrent dimension are served in ticket order: a free slot goes to the head, a later ticket or a one-shot acquisition is denied; a dead ticket stops blocking; dequeue and grant remove tickets",
			s(
				putB(0, conc, "concurrent", 1, 0, 0),
				putB(0, "elevenlabs#rpm", "requests", 100, 100, 60_000),
				acq(0, "H", 60_000, false, it(conc, 1)),
				acqQ(10, "W1", 60_000, 5000, it(conc, 1)),
				acqQ(20, "W2", 60_000, 5000, it(conc, 1), it("elevenlabs#rpm", 1)),
				acqQ(30, "W3", 60_000, 5000, it(conc, 1)),
				peek(30, conc),
				release(100, "H"),
				acqQ(110, "W2", 60_000, 5000, it(conc, 1), it("elevenlabs#rpm", 1)),
				acq(110, "X", 60_000, false, it(conc, 1)),
				acqQ(120, "W1", 60_000, 5000, it(conc, 1)),
				peek(120, conc),
				release(200, "W1"),
				acqQ(4000, "W3", 60_000, 5000, it(conc, 1)),
				acqQ(5500, "W2", 60_000, 5000, it(conc, 1), it("elevenlabs#rpm", 1)),
				release(6000, "W2"),
				dequeue(6000, "W3", conc),
				peek(6000, conc),
				acq(6000, "Y", 60_000, false, it(conc, 1)),
			)),
		v("queue-covered", "a waiter behind others is granted when the free slots cover its cost plus the costs of the live tickets ahead of it; a large waiter is not overtaken by more than the slots it cannot use; a dead ticket holds back only its own cost, until it expires",
			s(
				putB(0, "pool#concurrent", "concurrent", 3, 0, 0),
				acq(0, "H", 60_000, false, it("pool#concurrent", 3)),
				acqQ(10, "W1", 60_000, 5000, it("pool#concurrent", 2)),
				acqQ(15, "D", 60_000, 200, it("pool#concurrent", 1)),
				acqQ(20, "W2", 60_000, 5000, it("pool#concurrent", 1)),
				acqQ(30, "W3", 60_000, 5000, it("pool#concurrent", 1)),
				release(100, "H"),
				acqQ(110, "W2", 60_000, 5000, it("pool#concurrent", 1)),
				acqQ(300, "W2", 60_000, 5000, it("pool#concurrent", 1)),
				acqQ(310, "W3", 60_000, 5000, it("pool#concurrent", 1)),
				acq(310, "X", 60_000, false, it("pool#concurrent", 1)),
				acqQ(320, "W1", 60_000, 5000, it("pool#concurrent", 2)),
				peek(320, "pool#concurrent"),
			)),
		v("debt-kept", "settlements above their estimates keep the debt already there: each charge adds at most max_debt (default: the capacity) below the balance it finds, so a series goes deeper than one charge may; a refund in deep debt is kept whole; grants wait for the whole debt to refill",
			s(
				putB(0, tpm, "tokens", 1000, 1000, 60_000),
				acq(0, "A", 60_000, true, it(tpm, 300)),
				acq(0, "B", 60_000, true, it(tpm, 300)),
				acq(0, "C", 60_000, true, it(tpm, 300)),
				adjust(10, "A", tpm, 1000),
				adjust(10, "B", tpm, 1000),
				adjust(10, "C", tpm, 5000),
				peek(10, tpm),
				adjust(20, "B", tpm, -200),
				acq(20, "D", 60_000, false, it(tpm, 100)),
				peek(20, tpm),
			)),
	}
}

func resv(at int64, lease string, ttlMs int64, record bool, maxWaitMs int64, items ...ItemSpec) Step {
	return Step{AtMs: at, Op: "reserve", Lease: lease, TTLMs: ttlMs, Record: record, MaxWaitMs: maxWaitMs, Items: items}
}

func cancelR(at int64, lease string) Step { return Step{AtMs: at, Op: "cancel", Lease: lease} }

func acqQ(at int64, lease string, ttlMs, queueMs int64, items ...ItemSpec) Step {
	return Step{AtMs: at, Op: "acquire", Lease: lease, TTLMs: ttlMs, QueueMs: queueMs, Items: items}
}

func dequeue(at int64, lease string, dims ...string) Step {
	return Step{AtMs: at, Op: "dequeue", Lease: lease, Dimensions: dims}
}
