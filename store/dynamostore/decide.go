package dynamostore

import (
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// decision is what an acquisition computed from a set of rows.
type decision struct {
	next    [store.MaxItems]bucket.State
	costs   [store.MaxItems]int64
	record  bool // write lease items
	hold    bool // list the lease in the buckets' holders (asked for, or concurrent)
	granted bool
	// behind reports a refusal because the caller's clock is more than
	// the maximum skew behind a row's refill timestamp: nothing changes.
	behind  bool
	aligned [store.MaxItems]bucket.State
	// ahead counts, per item, the live tickets of others ahead of the
	// request in a concurrent bucket's waiter queue; queue is the grant's
	// edit of each queue (nil for none).
	ahead [store.MaxItems]int
	// aheadCost sums the costs of those tickets.
	aheadCost [store.MaxItems]int64
	queue     [store.MaxItems]*queueEdit
	// valid is a reservation's valid instant (0 for an acquisition).
	valid int64
}

// decide runs the bucket math on rows (parallel to req.Items) and fills res.
//
// Each row is first aligned with now (bucket.Align, maximum skew skew):
// the decision is made at the aligned time, and a caller more than skew
// behind a row's refill timestamp is refused (d.behind) before anything
// else (see refuseBehind).
func decide(bis []*bucketItem, req *store.AcquireRequest, now, skew int64, alwaysRecord bool, res *store.AcquireResult) (*decision, error) {
	d := &decision{hold: req.Record || alwaysRecord}
	n := len(bis)
	for i, bi := range bis {
		c, err := bi.b.ResolveCost(req.Items[i])
		if err != nil {
			return nil, err
		}
		d.costs[i] = c
		if bi.b.Type == bucket.Concurrent {
			d.hold = true
		}
	}
	d.record = d.hold || alwaysRecord
	if cap(res.Items) >= n {
		res.Items = res.Items[:n]
	} else {
		res.Items = make([]store.ItemResult, n)
	}
	poll := req.Poll
	res.Granted, res.Recorded, res.ExpiresAt, res.Ahead = false, false, time.Time{}, 0
	if res.RetryIn, res.Behind = refuseBehind(bis, d, now, skew, res.Items); res.Behind > 0 {
		return d, nil
	}
	d.granted = true
	var retry int64
	queueAhead(bis, req.ID, now, d.ahead[:n], d.aheadCost[:n])
	for i, bi := range bis {
		al := bi.st
		at, _ := bucket.Align(bi.lim, al, now, skew)
		d.aligned[i] = al
		st, wait, ok := bucket.Take(bi.lim, al, at, d.costs[i]*bucket.Milli)
		// The tickets ahead keep their costs: the balance must cover them
		// too.
		ok = ok && (d.aheadCost[i] == 0 || bucket.Available(bi.lim, al, at) >= (d.costs[i]+d.aheadCost[i])*bucket.Milli)
		d.next[i] = st
		ir := &res.Items[i]
		*ir = store.ItemResult{Dimension: bi.b.Name, Type: bi.b.Type, Cost: d.costs[i], Capacity: bi.b.Capacity}
		if ok {
			ir.Remaining = st.Tokens
			continue
		}
		d.granted = false
		if bi.lim.Type == bucket.Concurrent {
			wait = bucket.ConcurrentRetry(now, bi.earliest(), poll.Milliseconds())
		}
		ir.Remaining = bucket.Available(bi.lim, al, at)
		ir.RetryIn = msDur(wait)
		retry = max(retry, wait)
	}
	res.Granted, res.Recorded = d.granted, false
	res.RetryIn, res.ExpiresAt, res.Ahead = 0, time.Time{}, 0
	if d.granted {
		for i, bi := range bis {
			d.queue[i] = grantEdit(bi, req.ID, now)
		}
	} else {
		for i, bi := range bis {
			if bi.b.Type == bucket.Concurrent {
				res.Ahead = max(res.Ahead, d.ahead[i])
			}
		}
		res.RetryIn = msDur(retry)
		for i, bi := range bis {
			if res.Items[i].RetryIn == 0 {
				at, _ := bucket.Align(bi.lim, bi.st, now, skew)
				res.Items[i].Remaining = bucket.Available(bi.lim, bi.st, at)
			}
		}
	}
	return d, nil
}

// refuseBehind refuses an admission whose clock, at now, is more than skew
// behind the refill timestamp of one of rows bis (bucket.Align), with
// d.costs resolved: it marks d.behind, fills items (each such row waits
// bucket.SkewRetry, every other 0; the balances at the decision times)
// and returns the longest wait and how far behind the furthest such row
// the caller is. Otherwise it returns zeros and changes nothing.
func refuseBehind(bis []*bucketItem, d *decision, now, skew int64, items []store.ItemResult) (retry, behind time.Duration) {
	for _, bi := range bis {
		if _, late := bucket.Align(bi.lim, bi.st, now, skew); late > 0 {
			behind = max(behind, msDur(bi.st.Last-now))
		}
	}
	if behind == 0 {
		return 0, 0
	}
	d.behind = true
	for i, bi := range bis {
		at, late := bucket.Align(bi.lim, bi.st, now, skew)
		var w int64
		if late > 0 {
			w = bucket.SkewRetry(bi.lim, bi.st, at, late, d.costs[i]*bucket.Milli)
		}
		items[i] = store.ItemResult{Dimension: bi.b.Name, Type: bi.b.Type, Cost: d.costs[i], Capacity: bi.b.Capacity,
			Remaining: bucket.Available(bi.lim, bi.st, at), RetryIn: msDur(w)}
		retry = max(retry, msDur(w))
	}
	return retry, behind
}
