package storetest

import (
	"testing"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// fullStore is the whole contract, its optional operations included: the
// suite calls every store through it (see asFull), and runs the tests of
// an optional operation only for a store that implements it (see
// capabilities).
type fullStore interface {
	store.Queuer
	store.Cooler
	store.Syncer
}

// asFull returns s as a fullStore: s itself when it is one (as a store
// behind contract.Checked is), otherwise s with every optional operation
// it lacks answering errors.ErrUnsupported.
func asFull(s store.Store) fullStore {
	if f, ok := s.(fullStore); ok {
		return f
	}
	return contract.Forward{Store: s}
}

// checked returns s behind the portable layer's checks, as a fullStore.
func checked(s store.Store) fullStore { return asFull(contract.Checked(s)) }

// capabilities lists the optional operations a store implements.
type capabilities struct {
	// queue: store.Queuer (Reserve, Cancel, Dequeue and waiter queues).
	queue bool
	// cooldown: store.Cooler.
	cooldown bool
	// sync: store.Syncer.
	sync bool
}

// capabilitiesOf returns what s, behind contract.Checked or not,
// implements.
func capabilitiesOf(s store.Store) capabilities {
	raw := contract.Unwrap(s)
	var c capabilities
	_, c.queue = raw.(store.Queuer)
	_, c.cooldown = raw.(store.Cooler)
	_, c.sync = raw.(store.Syncer)
	return c
}

// all reports that every optional operation is implemented.
func (c capabilities) all() bool { return c.queue && c.cooldown && c.sync }

// supports reports whether the store implements the operation of a step
// or request kind: "reserve", "cancel", "dequeue", "cooldown", "sync",
// and, for the core operations, always.
func (c capabilities) supports(op string) bool {
	switch op {
	case "reserve", "cancel", "dequeue":
		return c.queue
	case "cooldown":
		return c.cooldown
	case "sync":
		return c.sync
	}
	return true
}

// stepSupported reports whether the store can run st: its operation is
// implemented, and an acquisition waits in line (QueueMs) only on a store
// with waiter queues.
func (c capabilities) stepSupported(st Step) bool {
	return c.supports(st.Op) && (st.QueueMs == 0 || c.queue)
}

// filter returns the steps the store can run, in order: a sequence
// generated for the whole contract narrowed to the store's operations.
func (c capabilities) filter(steps []Step) []Step {
	if c.all() {
		return steps
	}
	out := make([]Step, 0, len(steps))
	for _, st := range steps {
		if c.supports(st.Op) {
			if !c.queue {
				st.QueueMs = 0
			}
			out = append(out, st)
		}
	}
	return out
}

// need skips t unless the store implements op (see supports).
func (c capabilities) need(t *testing.T, op string) {
	t.Helper()
	if !c.supports(op) {
		t.Skipf("the store does not implement %s (an optional operation of the contract)", op)
	}
}
