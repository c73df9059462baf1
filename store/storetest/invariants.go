package storetest

import (
	"fmt"
	"maps"
	"slices"

	"github.com/ontopix/sluice/bucket"
)

// invariants checks, after every step of a model-based sequence, what must
// hold whatever the operations were: no balance above capacity; for a
// concurrent bucket, balance plus the slots its live records hold equals
// capacity; and for a time-based bucket, over any run of consecutive
// steps, the net debits (grants plus settled charges minus refunds) never
// exceed capacity minus the floor plus what the bucket can earn over that
// run. The window resets when the bucket is reconfigured or re-created.
// A bucket's refill timestamp never moves backwards, whatever clock the
// callers read, and never passes the latest time any of them reported, so
// the refill it is credited never exceeds its rate times that time minus
// its start. And no acquisition is granted on a bucket at a decision time
// before the end of its cooldown.
type invariants struct {
	win  map[string]*window
	seen int64 // the latest step time, in ms from the model's base
}

// window is one time-based bucket's events since its last reset.
type window struct {
	lasts  []int64 // the bucket's refill timestamp before each event
	debits []int64 // millitokens debited by each event
	end    int64   // refill timestamp after the latest event
	inc    int
}

func newInvariants() *invariants { return &invariants{win: map[string]*window{}} }

func (v *invariants) check(m *model, st Step, e Expect) string {
	if what := cooledGrant(m, st); what != "" {
		return what
	}
	v.seen = max(v.seen, st.AtMs)
	for _, name := range slices.Sorted(maps.Keys(m.buckets)) {
		b := m.buckets[name]
		if b.st.Tokens > b.lim.Capacity {
			return fmt.Sprintf("%s holds %d millitokens, above its capacity %d", name, b.st.Tokens, b.lim.Capacity)
		}
		if b.b.Type == bucket.Concurrent {
			if what := concurrentHeld(m, b); what != "" {
				return what
			}
			continue
		}
		if b.st.Last > m.base+v.seen {
			return fmt.Sprintf("%s: refill timestamp %d after the latest time any caller reported, %d", name, b.st.Last-m.base, v.seen)
		}
		if w := v.win[name]; w != nil && w.inc == b.inc && b.st.Last < w.end {
			return fmt.Sprintf("%s: refill timestamp moved back from %d to %d (step at %d)", name, w.end-m.base, b.st.Last-m.base, st.AtMs)
		}
		if what := v.windowCheck(m, b, st, e); what != "" {
			return what
		}
	}
	return ""
}

// cooledGrant reports a grant made on a bucket before its cooldown ended.
func cooledGrant(m *model, st Step) string {
	for i, at := range m.decided {
		d := st.Items[i].Dimension
		if b := m.buckets[d]; b != nil && at < b.st.Until {
			return fmt.Sprintf("%s granted at %d, before the end of its cooldown at %d", d, at-m.base, b.st.Until-m.base)
		}
	}
	return ""
}

func concurrentHeld(m *model, b *mBucket) string {
	var held int64
	for _, l := range m.leases {
		for i, it := range l.items {
			if _, ok := m.live(l, i); ok && l.record && it.Dimension == b.b.Name {
				held += it.Cost * bucket.Milli
			}
		}
	}
	if b.st.Tokens+held != b.lim.Capacity {
		return fmt.Sprintf("%s: balance %d + held %d != capacity %d", b.b.Name, b.st.Tokens, held, b.lim.Capacity)
	}
	return ""
}

// debit returns the millitokens step st debited from bucket name.
func debit(st Step, e Expect, name string) int64 {
	switch {
	case e.Error != "":
		return 0
	case st.Op == "acquire" && e.Granted:
		for _, it := range e.Items {
			if it.Dimension == name {
				return it.Cost * bucket.Milli
			}
		}
	case st.Op == "adjust" && st.Dimension == name:
		return e.Applied
	}
	// Reservations debit ahead of time and cancellations give back: the
	// usage check (usageCheck) counts them at their valid instants.
	return 0
}

func (v *invariants) windowCheck(m *model, b *mBucket, st Step, e Expect) string {
	name := b.b.Name
	w := v.win[name]
	// While reservations are pending (and when one is made or
	// cancelled), debt below the floor is theirs and the usage check
	// (usageCheck) is the bound: the window restarts.
	reset := w == nil || w.inc != b.inc ||
		(st.Op == "put_bucket" && st.Bucket != nil && st.Bucket.Name == name && e.Error == "") ||
		st.Op == "reserve" || st.Op == "cancel" || b.st.Reserved > m.base+st.AtMs
	if reset {
		v.win[name] = &window{end: b.st.Last, inc: b.inc}
		return ""
	}
	if m.replayed {
		return "" // a retry answered as the grant it was debits nothing
	}
	w.lasts = append(w.lasts, w.end)
	w.debits = append(w.debits, debit(st, e, name))
	w.end = b.st.Last
	// A balance starts a window at most at the capacity and ends it where
	// it is: at the floor or above, or below it when settlements kept debt
	// that was already there (Adjust never forgives debt).
	low := min(b.lim.Floor, b.st.Tokens)
	var sum int64
	for i := len(w.debits) - 1; i >= 0; i-- {
		sum += w.debits[i]
		earned := (w.end - w.lasts[i]) * b.lim.Amount / b.lim.Period
		if allowed := b.lim.Capacity - low + earned; sum > allowed {
			return fmt.Sprintf("%s: %d millitokens debited over the last %d steps, more than capacity - min(floor, balance) + earned = %d",
				name, sum, len(w.debits)-i, allowed)
		}
	}
	return ""
}
