package memstore

import (
	"slices"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// queueAhead deletes the dead tickets of es's concurrent queues and fills
// ahead and aheadCost with, per item, the number and the total cost of the
// live tickets of others ahead of id's place (see
// store.AcquireRequest.Queue). The caller holds the locks of es.
func queueAhead(es []*entry, id store.LeaseID, now int64, ahead []int, aheadCost []int64) {
	conc := false
	for _, e := range es {
		if e.b.Type == bucket.Concurrent && len(e.queue) > 0 {
			e.queue = slices.DeleteFunc(e.queue, func(t store.Ticket) bool { return t.Expires <= now })
			conc = true
		}
	}
	clear(ahead)
	clear(aheadCost)
	if !conc {
		return
	}
	me := store.Ticket{ID: id, At: place(es, id, now)}
	for i, e := range es {
		for _, t := range e.queue {
			if t.ID != id && t.Before(me) {
				ahead[i]++
				aheadCost[i] += t.Cost
			}
		}
	}
}

// place returns the At of id's earliest live ticket in es's queues, else
// now.
func place(es []*entry, id store.LeaseID, now int64) int64 {
	at, found := now, false
	for _, e := range es {
		for _, t := range e.queue {
			if t.ID == id && t.Expires > now && (!found || t.At < at) {
				at, found = t.At, true
			}
		}
	}
	return at
}

// enqueue takes or renews id's tickets, of costs, on es's concurrent
// buckets when queueMs is not zero, and returns the most tickets ahead of
// it.
func enqueue(es []*entry, id store.LeaseID, ahead []int, costs []int64, now, queueMs int64) int {
	n, conc := 0, false
	for i, e := range es {
		if e.b.Type == bucket.Concurrent {
			n, conc = max(n, ahead[i]), true
		}
	}
	if queueMs == 0 || !conc {
		return n
	}
	at := place(es, id, now)
	for i, e := range es {
		if e.b.Type != bucket.Concurrent {
			continue
		}
		if k := slices.IndexFunc(e.queue, func(t store.Ticket) bool { return t.ID == id }); k >= 0 {
			e.queue[k].Expires, e.queue[k].Cost = now+queueMs, costs[i]
			continue
		}
		e.queue = append(e.queue, store.Ticket{ID: id, At: at, Expires: now + queueMs, Cost: costs[i]})
	}
	return n
}

// dequeueAll removes id's tickets from es's queues.
func dequeueAll(es []*entry, id store.LeaseID) {
	for _, e := range es {
		if len(e.queue) > 0 {
			e.queue = slices.DeleteFunc(e.queue, func(t store.Ticket) bool { return t.ID == id })
		}
	}
}
