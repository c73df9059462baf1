package storetest

import "github.com/ontopix/sluice/store"

// resendable reports whether op carries an operation id that a store with
// Harness.DedupesOps applies at most once: a driver may send it again
// after its reply was lost, and the resend is answered as the first send
// was.
func resendable(op string) bool {
	switch op {
	case "acquire", "reserve", "adjust", "penalize", "cancel", "release":
		return true
	}
	return false
}

// resent answers a resend of the previous step: the first answer, nothing
// changed, nothing debited (m.replayed). A resend that follows a step that
// is not resendable, which only shrinking produces, sends nothing.
func (m *model) resent() Expect {
	m.replayed, m.decided = true, nil
	if m.last == nil {
		return Expect{}
	}
	return *m.last
}

// maybeResend adds, now and then, a resend of the last step when it is
// resendable and the store recognises operation ids.
func (g *gen) maybeResend() {
	if !g.resends || len(g.steps) == 0 || g.dropped || g.rng.IntN(100) >= 12 {
		return
	}
	st := g.steps[len(g.steps)-1]
	if !resendable(st.Op) || st.Resend {
		return
	}
	st.Resend, st.Expect = true, Expect{}
	g.add(st)
}

// op returns a fresh operation id for a request the runner sends: random,
// since several runners may share a prefix (the linearizability test's
// clients) and an id they shared would make one's request a resend of
// another's.
func (r *runner) op() store.LeaseID { return store.NewLeaseID() }
