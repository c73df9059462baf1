package history

import (
	"strconv"
	"time"
)

// WaitBounds are the upper bounds of the wait histogram (Counts.WaitHist):
// bucket i counts the waits that lasted more than WaitBounds[i-1] and at
// most WaitBounds[i]; the last bucket counts those longer than the last
// bound. The slice is read-only: the Recorder keeps its own copy, and
// changing it changes nothing but what callers read.
var WaitBounds = []time.Duration{
	10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
	30 * time.Second, time.Minute,
}

// bounds is the Recorder's copy of WaitBounds.
var bounds = [nBounds]time.Duration{
	10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
	30 * time.Second, time.Minute,
}

const nBounds = 11

// The response classes of Counts.Responses.
const (
	Class2xx       = "2xx"          // a 2xx response
	Class4xx       = "4xx"          // a 4xx response other than 429
	Class5xx       = "5xx"          // a 5xx response
	Class429Req    = "429_requests" // a 429 naming a requests limit
	Class429Tokens = "429_tokens"   // a 429 naming a token limit
	Class429Other  = "429_other"    // a 429 naming no limit, or another one
	ClassError     = "error"        // no response: the call failed on the way
	ClassOther     = "other"        // any other status (1xx, 3xx)
)

// classes lists the response classes in counter order.
var classes = [nClasses]string{Class2xx, Class4xx, Class5xx, Class429Req, Class429Tokens, Class429Other, ClassError, ClassOther}

// Indices of the classes.
const (
	r2xx = iota
	r4xx
	r5xx
	r429Req
	r429Tokens
	r429Other
	rError
	rOther
	nClasses
)

// Counter indices of a tally.
const (
	cGrants = iota
	cRefusals
	cDegraded
	cErrors
	cWaits
	cWaitSum // nanoseconds
	cReserved
	cSettled
	cDebt
	cUnmetered
	cHist                           // nBounds+1 histogram buckets
	cResp     = cHist + nBounds + 1 // nClasses response classes
	nCounters = cResp + nClasses
)

// counterNames are the names of a tally's counters in a store row.
var counterNames = func() (n [nCounters]string) {
	copy(n[:], []string{"grants", "refusals", "degraded", "errors", "waits", "wait_sum_ns", "reserved", "settled", "debt", "unmetered"})
	for i := 0; i <= nBounds; i++ {
		n[cHist+i] = "wait_hist_" + strconv.Itoa(i)
	}
	for i, c := range classes {
		n[cResp+i] = "resp_" + c
	}
	return n
}()

// minRemainingName is the row counter of the lowest remaining value; it
// combines by minimum where every other counter combines by sum.
const minRemainingName = "min_remaining"

// tally is the Recorder's running totals of one series over one span.
type tally struct {
	n [nCounters]int64
	// minRem is the lowest vendor-reported remaining; -1 when none.
	minRem int64
}

func newTally() tally { return tally{minRem: -1} }

// remaining lowers t's lowest remaining to v.
func (t *tally) remaining(v int64) {
	if t.minRem < 0 || v < t.minRem {
		t.minRem = v
	}
}

// wait counts one wait of d.
func (t *tally) wait(d time.Duration) {
	t.n[cWaits]++
	t.n[cWaitSum] += int64(d)
	i := 0
	for i < nBounds && d > bounds[i] {
		i++
	}
	t.n[cHist+i]++
}

// add adds u into t: sums, and the lower remaining.
func (t *tally) add(u *tally) {
	for i := range t.n {
		t.n[i] += u.n[i]
	}
	if u.minRem >= 0 {
		t.remaining(u.minRem)
	}
}

// counters returns t as a store row's counters: the non-zero ones, and
// min_remaining when a remaining value was reported.
func (t *tally) counters() map[string]int64 {
	m := make(map[string]int64, 8)
	for i, v := range t.n {
		if v != 0 {
			m[counterNames[i]] = v
		}
	}
	if t.minRem >= 0 {
		m[minRemainingName] = t.minRem
	}
	return m
}

// tallyOf reads a store row's counters; names it does not know are
// ignored, as a newer writer's would be.
func tallyOf(m map[string]int64) tally {
	t := newTally()
	for i, name := range counterNames {
		t.n[i] = m[name]
	}
	if v, ok := m[minRemainingName]; ok && v >= 0 {
		t.minRem = v
	}
	return t
}

// Counts are totals over a span of time for one dimension, and one caller
// or all of them. Tokens are whole tokens.
type Counts struct {
	// Grants counts acquisitions granted (degraded ones and leases handed
	// over included); Refusals those answered RetryIn (a fail-fast
	// Acquire's refusal, or one attempt of a wait that tries again);
	// Degraded the grants made without the store (fail open); Errors the
	// acquisitions that failed. An acquisition of several dimensions
	// counts once in each; a refusal counts in the dimensions that were
	// short. A wait's reservation counts as granted when the store grants
	// it, also when the wait's deadline then comes before the reservation
	// is valid and the wait gives it back.
	Grants, Refusals, Degraded, Errors int64
	// Waits counts the waits that ended (Wait, WithSlot, Slot), granted
	// or not; WaitSum is their total duration, and WaitHist their count
	// by duration over WaitBounds (len(WaitBounds)+1 buckets).
	Waits    int64
	WaitSum  time.Duration
	WaitHist []int64
	// Reserved is the cost granted at acquisition, in tokens (slots for a
	// concurrent dimension). Settled is the sum of the costs that
	// Lease.Adjust and Lease.Settle left (SettleEvent.Actual): a lease
	// settled once adds its final cost; one adjusted twice adds both
	// results. Debt is the part of those settlements above the cost held
	// before (Actual − Estimate, when positive).
	Reserved, Settled, Debt int64
	// Responses counts vendor responses by class: "2xx", "4xx" (429
	// excepted), "5xx", "429_requests", "429_tokens", "429_other" and
	// "error" (no response came), plus "other" for any other status.
	// Only the classes seen are present; nil when none.
	Responses map[string]int64
	// MinRemaining is the lowest remaining value a vendor reported in its
	// rate-limit headers, in the dimension's unit; -1 when none was.
	MinRemaining int64
	// Unmetered counts calls sent without Sluice's metering (a
	// transport.Passed event).
	Unmetered int64
}

// counts converts t.
func (t *tally) counts() Counts {
	c := Counts{
		Grants: t.n[cGrants], Refusals: t.n[cRefusals], Degraded: t.n[cDegraded], Errors: t.n[cErrors],
		Waits: t.n[cWaits], WaitSum: time.Duration(t.n[cWaitSum]), WaitHist: make([]int64, nBounds+1),
		Reserved: t.n[cReserved], Settled: t.n[cSettled], Debt: t.n[cDebt],
		MinRemaining: t.minRem, Unmetered: t.n[cUnmetered],
	}
	copy(c.WaitHist, t.n[cHist:cHist+nBounds+1])
	for i, cl := range classes {
		if v := t.n[cResp+i]; v != 0 {
			if c.Responses == nil {
				c.Responses = make(map[string]int64, 2)
			}
			c.Responses[cl] = v
		}
	}
	return c
}
