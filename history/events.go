package history

import (
	"strings"
	"time"
)

// The kinds of Event.
const (
	// EventCooldown: a cooldown reached the store (Client.Cooldown, or a
	// Transport's reaction to a 429).
	EventCooldown = "cooldown"
	// EventSync: a Sync lowered a balance to what the vendor reported.
	EventSync = "sync"
	// EventReconcile: a reconcile batch restored expired leases, or failed.
	EventReconcile = "reconcile"
	// EventStoreError: a store call failed, this Recorder's own writes
	// included.
	EventStoreError = "store_error"
	// EventRecreated: the Client re-created a declared bucket the store
	// had lost; the limit it enforces starts again full.
	EventRecreated = "recreated"
	// EventPenalty: a Penalize cut a balance.
	EventPenalty = "penalty"
	// EventLeaseLost: a SlotHandle gave its lease up.
	EventLeaseLost = "lease_lost"
	// EventLimit: a Transport reconfigured a bucket to follow a limit the
	// vendor reported (see TransportEvent).
	EventLimit = "limit"
)

// Event is something an operator wants to see in a log: a cooldown, a
// sync that lowered a balance, a reconcile, a store error, a re-created
// bucket.
type Event struct {
	// Time is when the Recorder saw it (the last time, for a repeated one).
	Time time.Time
	// Kind is one of the Event constants, e.g. "cooldown".
	Kind string
	// Dimension is the dimension concerned; "" when the event concerns
	// none (a store error, a reconcile).
	Dimension string
	// Detail says what happened, for a person to read.
	Detail string
	// Count is how many identical events in a row this one stands for:
	// an event of the same kind, dimension and detail as the newest is
	// counted in it, not added.
	Count int
}

// eventRing keeps the newest events: buf grows to max, then next is
// where the oldest is overwritten.
type eventRing struct {
	max  int
	buf  []Event
	next int
}

// at returns the i-th newest event (0: the newest); i < len(buf).
func (e *eventRing) at(i int) *Event {
	n := len(e.buf)
	if n < e.max {
		return &e.buf[n-1-i]
	}
	return &e.buf[((e.next-1-i)%n+n)%n]
}

func (e *eventRing) add(ev Event) {
	if len(e.buf) > 0 {
		if last := e.at(0); last.Kind == ev.Kind && last.Dimension == ev.Dimension && last.Detail == ev.Detail {
			last.Count++
			last.Time = ev.Time
			return
		}
	}
	ev.Count = 1
	if len(e.buf) < e.max {
		e.buf = append(e.buf, ev)
		return
	}
	e.buf[e.next] = ev
	e.next = (e.next + 1) % e.max
}

// newest returns up to n events, newest first.
func (e *eventRing) newest(n int) []Event {
	n = max(min(n, len(e.buf)), 0)
	out := make([]Event, n)
	for i := range out {
		out[i] = *e.at(i)
	}
	return out
}

// event records one event.
func (r *Recorder) event(kind, dim, detail string) {
	if len(detail) > maxDetail {
		detail = strings.ToValidUTF8(detail[:maxDetail], "") + "…"
	}
	t := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events.add(Event{Time: t, Kind: kind, Dimension: dim, Detail: detail})
}

// maxDetail bounds an event's Detail, in bytes: the events kept take at
// most about a megabyte, whatever the errors say.
const maxDetail = 1024

// Events returns the last n events, newest first: at most the number kept
// (1,000 by default, WithMaxEvents). Events survive neither a restart nor
// another process: they are this process's.
func (r *Recorder) Events(n int) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.events.newest(n)
}
