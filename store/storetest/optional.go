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

// capabilities lists the optional operations a store lacks; the zero
// value is a store that implements them all.
type capabilities struct {
	// noQueue: no store.Queuer (Reserve, Cancel, Dequeue, waiter queues).
	noQueue bool
	// noCooldown: no store.Cooler.
	noCooldown bool
	// noSync: no store.Syncer.
	noSync bool
	// noUsage: no store.Usager.
	noUsage bool
}

// capabilitiesOf returns what s, behind contract.Checked or not,
// implements.
func capabilitiesOf(s store.Store) capabilities {
	raw := contract.Unwrap(s)
	_, q := raw.(store.Queuer)
	_, c := raw.(store.Cooler)
	_, y := raw.(store.Syncer)
	_, u := raw.(store.Usager)
	return capabilities{noQueue: !q, noCooldown: !c, noSync: !y, noUsage: !u}
}

// supports reports whether the store implements the operation of a step
// or request kind: "reserve", "cancel", "dequeue", "cooldown", "sync",
// "usage", and, for the core operations, always.
func (c capabilities) supports(op string) bool {
	switch op {
	case "reserve", "cancel", "dequeue":
		return !c.noQueue
	case "cooldown":
		return !c.noCooldown
	case "sync":
		return !c.noSync
	case "usage":
		return !c.noUsage
	}
	return true
}

// stepSupported reports whether the store can run st: its operation is
// implemented, and an acquisition waits in line (QueueMs) only on a store
// with waiter queues.
func (c capabilities) stepSupported(st Step) bool {
	return c.supports(st.Op) && (st.QueueMs == 0 || !c.noQueue)
}

// need skips t unless the store implements op (see supports).
func (c capabilities) need(t *testing.T, op string) {
	t.Helper()
	if !c.supports(op) {
		t.Skipf("the store does not implement %s (an optional operation of the contract)", op)
	}
}
